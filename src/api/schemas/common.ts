import { Type } from '@sinclair/typebox';
import { ERROR_CATALOGUE } from '../../domain/errors.js';
import { ENVIRONMENTS } from '../../domain/types.js';
import { ref } from './ref.js';

const literals = <T extends string>(values: readonly T[]) => values.map((v) => Type.Literal(v));

export const ErrorBody = Type.Object(
  {
    code: Type.Union(literals(Object.keys(ERROR_CATALOGUE))),
    message: Type.String(),
  },
  { $id: 'ErrorBody', description: 'Every 4xx and 5xx answer has this body.' },
);

export const MessageResponse = Type.Object(
  { message: Type.Optional(Type.String()) },
  { $id: 'MessageResponse' },
);

export const Endpoint = Type.Object(
  { host: Type.String(), port: Type.Integer() },
  { $id: 'Endpoint' },
);

export const ConnectionPooler = Type.Object(
  { endpoint: Type.Optional(ref(Endpoint)) },
  { $id: 'ConnectionPooler' },
);

export const EnvironmentTag = Type.Union(literals(ENVIRONMENTS), { $id: 'EnvironmentTag' });

export const SetEnvironmentInput = Type.Object(
  { environment: Type.Union(literals(ENVIRONMENTS)) },
  { $id: 'SetEnvironmentInput', additionalProperties: false },
);

export const Metadata = Type.Object(
  { environment: Type.Optional(Type.String()) },
  { $id: 'Metadata' },
);

export const Project = Type.Object({ id: Type.String(), name: Type.String() }, { $id: 'Project' });

export { literals };
