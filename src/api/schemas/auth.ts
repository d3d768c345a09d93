// GET /v1/auth/info: who the calling credential is, in the shape the
// upstream CLI reads when it logs in (docs/decisions.md, Credentials).

import { type Static, Type } from '@sinclair/typebox';
import { ref } from './ref.js';

export const AuthInfoUser = Type.Object(
  {
    id: Type.String(),
    name: Type.String(),
    email: Type.String({ format: 'email' }),
  },
  { $id: 'AuthInfoUser' },
);

export const AuthInfoProject = Type.Object(
  {
    id: Type.String(),
    name: Type.String(),
    plan_type: Type.String({ description: 'always SELF_HOSTED: Basin has no plans' }),
  },
  { $id: 'AuthInfoProject' },
);

export const AuthInfoApiKey = Type.Object(
  {
    public_key: Type.String({ description: 'the access key of the credential' }),
    name: Type.String({ description: 'the name of the credential' }),
    created: Type.String({ format: 'date-time' }),
    project: ref(AuthInfoProject),
    issuing_user: ref(AuthInfoUser),
  },
  { $id: 'AuthInfoApiKey' },
);

export const AuthInfo = Type.Object(
  {
    type: Type.Union([Type.Literal('apiKey'), Type.Literal('oauth')], {
      description: 'apiKey: a project credential; oauth: a user token',
    }),
    api_key: Type.Optional(ref(AuthInfoApiKey)),
    // The vendor's older spelling, which its document still lists: sent beside
    // api_key with the same value, as vpcEndpoint beside vpc_endpoint.
    apiKey: Type.Optional(
      Type.Unsafe<Static<typeof AuthInfoApiKey>>({
        allOf: [Type.Ref(AuthInfoApiKey.$id as string)],
        deprecated: true,
        description: 'the same as api_key (the older spelling, kept for older clients)',
      }),
    ),
    oauth: Type.Optional(Type.Object({ user: ref(AuthInfoUser) })),
  },
  {
    $id: 'AuthInfo',
    description:
      'Exactly one of api_key (type apiKey, then also as apiKey) and oauth (type oauth) is present.',
  },
);

/** POST /v1/auth/logout's optional body, as upstream: what a client may hold besides its token. */
export const LogoutInput = Type.Object(
  {
    refresh_token: Type.Optional(
      Type.String({
        description:
          'accepted for upstream clients; Basin issues no refresh tokens, so it changes nothing',
      }),
    ),
  },
  { $id: 'LogoutInput', additionalProperties: false },
);
