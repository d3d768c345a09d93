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
    // Basin's own: clients generated from the vendor's document never send it.
    source: Type.Optional(
      Type.String({
        description:
          "Basin's extension: `basin` for Basin's own entries only, `database` for the server's only (entries[].source)",
        'x-basin-extension': true,
      }),
    ),
  },
  { additionalProperties: false },
);

/**
 * Who wrote an entry (Basin's extension, which clients generated from the
 * vendor's document ignore like any field they do not know): `basin`, an
 * entry Basin wrote itself, which nothing a database role does can make;
 * `database`, a line of the server's log, whatever its text says.
 */
const LogEntrySource = Type.Union([Type.Literal('basin'), Type.Literal('database')], {
  description:
    "Basin's extension: `basin` for Basin's own entries (no database role can write one), `database` for the server's lines",
  'x-basin-extension': true,
});

export const ServiceLogsResponse = Type.Object(
  {
    logs: Type.Array(Type.String()),
    entries: Type.Optional(
      Type.Array(
        Type.Object({
          message: Type.String(),
          severity: Type.String(),
          timestamp: Type.String(),
          // Optional as the spec's fields are; Basin always sends it.
          source: Type.Optional(LogEntrySource),
        }),
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
