import { Type } from '@sinclair/typebox';

const StringOrList = (description: string) =>
  Type.Union([Type.String(), Type.Array(Type.String())], { description });

export const LogsQuery = Type.Object(
  {
    cursor: Type.Optional(Type.String({ description: 'lastCursor of the previous page' })),
    node: Type.Optional(
      Type.String({ pattern: '^[0-9]{1,3}$', description: 'node number, 0 is the primary' }),
    ),
    search: Type.Optional(StringOrList('repeat for several terms; all must match')),
    severities: Type.Optional(StringOrList('repeat for several; any may match')),
    since: Type.Optional(Type.String({ description: 'RFC 3339' })),
    until: Type.Optional(Type.String({ description: 'RFC 3339' })),
  },
  { additionalProperties: false },
);

export const ServiceLogsResponse = Type.Object(
  {
    logs: Type.Array(Type.String()),
    entries: Type.Optional(
      Type.Array(
        Type.Object({ message: Type.String(), severity: Type.String(), timestamp: Type.String() }),
      ),
    ),
    lastCursor: Type.Optional(
      Type.String({ description: 'pass as cursor for the next (older) page; absent at the end' }),
    ),
    last_cursor: Type.Optional(
      Type.String({ description: 'the same as lastCursor, for clients that read this spelling' }),
    ),
  },
  { $id: 'ServiceLogsResponse' },
);
