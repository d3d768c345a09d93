// Opaque paging cursors. A cursor is the base64url encoding of a small flat JSON
// object plus a version field. Clients must treat it as opaque and pass it back
// unchanged; the codec only accepts text it could have produced itself, so a
// mangled, hand-made or truncated cursor is rejected with InvalidCursorError
// (a 400 for the client) instead of reaching a driver as nonsense.

/** A cursor that was not issued here, or was changed: the client's mistake (a 400). */
export class InvalidCursorError extends Error {
  constructor() {
    super('cursor is not valid: pass lastCursor from a previous response, unchanged.');
    this.name = 'InvalidCursorError';
  }
}

/** The codec's format version; bump it when the encoding itself changes. */
const VERSION = 1;
/** Longer text is never a cursor we issued; refusing it early bounds the work. */
const MAX_CURSOR_LENGTH = 1024;
const BASE64URL = /^[A-Za-z0-9_-]+$/;

/** The fields a cursor may carry: flat, strings and finite numbers only. */
export type CursorFields = Record<string, string | number>;

/**
 * Encodes `fields` as an opaque cursor. Flat and typed so that decoding can be
 * checked exactly. The key `v` is reserved for the codec version.
 */
export function encodeCursor(fields: CursorFields): string {
  if (Object.hasOwn(fields, 'v')) {
    throw new TypeError('cursor field "v" is reserved for the codec version');
  }
  for (const [key, value] of Object.entries(fields)) {
    if (typeof value === 'number' && !Number.isFinite(value)) {
      throw new TypeError(`cursor field ${JSON.stringify(key)} must be a finite number`);
    }
  }
  return Buffer.from(JSON.stringify({ v: VERSION, ...fields }), 'utf8').toString('base64url');
}

/**
 * Decodes a cursor made by encodeCursor and checks its fields (without `v`)
 * with `check`. Throws InvalidCursorError for anything else: bad characters,
 * bad base64, bad JSON, another version, wrong shape or types, or any text
 * that does not re-encode to exactly itself (padding, whitespace, extra bytes).
 */
export function decodeCursor<T>(text: string, check: (o: unknown) => o is T): T {
  if (typeof text !== 'string' || text.length > MAX_CURSOR_LENGTH || !BASE64URL.test(text)) {
    throw new InvalidCursorError();
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'));
  } catch {
    throw new InvalidCursorError();
  }
  if (!isPlainObject(parsed) || parsed['v'] !== VERSION) throw new InvalidCursorError();
  const fields: Record<string, unknown> = { ...parsed };
  delete fields['v'];
  if (!isFlat(fields) || encodeCursor(fields) !== text || !check(fields)) {
    throw new InvalidCursorError();
  }
  return fields;
}

type FieldKind = 'string' | 'number' | 'integer';
type FieldsOf<S extends Record<string, FieldKind>> = {
  [K in keyof S]: S[K] extends 'string' ? string : number;
};

/**
 * Builds a `check` for decodeCursor from a shape such as
 * `{ t: 'string', i: 'integer' }`: the object must have exactly these keys,
 * with these types (`integer` means a safe integer), and nothing else.
 */
export function cursorShape<S extends Record<string, FieldKind>>(
  shape: S,
): (o: unknown) => o is FieldsOf<S> {
  const keys = Object.keys(shape);
  return (o: unknown): o is FieldsOf<S> => {
    if (!isPlainObject(o) || Object.keys(o).length !== keys.length) return false;
    return keys.every((key) => {
      if (!Object.hasOwn(o, key)) return false;
      const value = o[key];
      switch (shape[key]) {
        case 'string':
          return typeof value === 'string';
        case 'number':
          return typeof value === 'number' && Number.isFinite(value);
        case 'integer':
          return Number.isSafeInteger(value);
        default:
          return false;
      }
    });
  };
}

function isPlainObject(o: unknown): o is Record<string, unknown> {
  return typeof o === 'object' && o !== null && !Array.isArray(o);
}

function isFlat(o: Record<string, unknown>): o is CursorFields {
  return Object.values(o).every(
    (value) => typeof value === 'string' || (typeof value === 'number' && Number.isFinite(value)),
  );
}
