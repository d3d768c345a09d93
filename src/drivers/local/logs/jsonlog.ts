// PostgreSQL's jsonlog format (log_destination = 'jsonlog', PostgreSQL 15+):
// one JSON object per line, e.g.
//   {"timestamp":"2026-11-22 02:00:13.241 UTC","user":"postgres","pid":18662,
//    "error_severity":"ERROR","state_code":"42P01",
//    "message":"relation \"no_such_table\" does not exist",
//    "statement":"select * from no_such_table","backend_type":"client backend",...}
// Only `timestamp`, `error_severity` and `message` are used: an entry's message
// is PostgreSQL's primary message alone, as in the API's examples; `detail`,
// `hint` and `statement` are left out rather than glued into one string.

/** One parsed line. */
export interface JsonlogRecord {
  /** Milliseconds since the epoch. */
  timeMs: number;
  severity: string;
  message: string;
  /**
   * Bytes of an over-long line that Basin did not read, when they may hold
   * the rest of `message` (see parseJsonlogPrefix); absent for a whole line.
   */
  cut?: number;
}

/** A line's record, or undefined for anything else (garbage, a torn line, another format). */
export function parseJsonlogLine(text: string): JsonlogRecord | undefined {
  if (!text.startsWith('{')) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof parsed !== 'object' || parsed === null) return undefined;
  const { timestamp, error_severity: severity, message } = parsed as Record<string, unknown>;
  if (typeof timestamp !== 'string' || typeof severity !== 'string') return undefined;
  const timeMs = parsePgTimestamp(timestamp);
  if (timeMs === undefined) return undefined;
  // PostgreSQL omits `message` only when there is none; an entry still happened.
  return { timeMs, severity, message: typeof message === 'string' ? message : '' };
}

/**
 * The record of a line that was cut to its first bytes (`cut` more were
 * not read: see backward-lines.ts), read as far as it goes. PostgreSQL
 * writes `timestamp` first and `error_severity` and `message` before the
 * fields that make lines long (`detail`, `statement`, `context`…), so a
 * cut line still has them: it is an entry when its time and severity are
 * whole. Its message is then whole too, or as much of it as was read, in
 * which case the record carries `cut`. Undefined for anything else
 * (garbage, another format, a line cut before its severity).
 */
export function parseJsonlogPrefix(text: string, cut: number): JsonlogRecord | undefined {
  const fields = new Map<string, string | number | boolean | null>();
  let partialMessage: string | undefined;
  const reader = new PrefixReader(text);
  if (!reader.take('{')) return undefined;
  let closed = false;
  for (;;) {
    if (reader.atEnd) break;
    if (reader.take('}')) {
      closed = true;
      break;
    }
    if (fields.size > 0 && !reader.take(',')) return undefined;
    const key = reader.string();
    if (key === GARBAGE) return undefined;
    if (key === CUT || !reader.take(':')) {
      if (reader.atEnd) break;
      return undefined;
    }
    if (reader.peek() === '"') {
      const value = reader.string();
      if (value === GARBAGE) return undefined;
      if (value === CUT) {
        if (key.value === 'message') partialMessage = reader.partial;
        break;
      }
      fields.set(key.value, value.value);
    } else {
      const value = reader.scalar();
      if (value === GARBAGE) return undefined;
      if (value === CUT) break;
      fields.set(key.value, value.value);
    }
  }
  const timestamp = fields.get('timestamp');
  const severity = fields.get('error_severity');
  if (typeof timestamp !== 'string' || typeof severity !== 'string') return undefined;
  const timeMs = parsePgTimestamp(timestamp);
  if (timeMs === undefined) return undefined;
  const message = fields.get('message');
  if (typeof message === 'string') return { timeMs, severity, message };
  // No message: whole when the object ended without one, else cut off before or inside it.
  return closed
    ? { timeMs, severity, message: '' }
    : { timeMs, severity, message: partialMessage ?? '', cut };
}

const CUT = Symbol('cut');
const GARBAGE = Symbol('garbage');
type Read<T> = { value: T } | typeof CUT | typeof GARBAGE;

/** A cursor over JSON text that may stop anywhere: CUT when it ran out, GARBAGE when it is not JSON. */
class PrefixReader {
  private i = 0;
  /** The decoded part of the string that ran out (for a cut message). */
  partial = '';

  constructor(private readonly text: string) {}

  get atEnd(): boolean {
    this.skipSpace();
    return this.i >= this.text.length;
  }

  peek(): string | undefined {
    this.skipSpace();
    return this.text[this.i];
  }

  take(c: string): boolean {
    if (this.peek() !== c) return false;
    this.i++;
    return true;
  }

  string(): Read<string> {
    if (this.peek() !== '"') return this.atEnd ? CUT : GARBAGE;
    const from = this.i;
    for (let j = from + 1; j < this.text.length; j++) {
      const c = this.text.charCodeAt(j);
      if (c === 0x5c)
        j++; // a backslash escapes the next character
      else if (c === 0x22) {
        this.i = j + 1;
        try {
          return { value: JSON.parse(this.text.slice(from, j + 1)) as string };
        } catch {
          return GARBAGE;
        }
      }
    }
    // Ran out: decode what there is, without an escape sequence cut in two.
    try {
      this.partial = JSON.parse(`"${dropCutEscape(this.text.slice(from + 1))}"`) as string;
    } catch {
      this.partial = '';
    }
    this.i = this.text.length;
    return CUT;
  }

  /** A number, true, false or null. */
  scalar(): Read<number | boolean | null> {
    const m = /^[^,}\s]*/.exec(this.text.slice(this.i, this.i + 64));
    const token = m?.[0] ?? '';
    if (this.i + token.length >= this.text.length) return CUT;
    this.i += token.length;
    if (token === 'true' || token === 'false' || token === 'null') {
      return { value: token === 'null' ? null : token === 'true' };
    }
    const n = Number(token);
    return token !== '' && Number.isFinite(n) ? { value: n } : GARBAGE;
  }

  private skipSpace(): void {
    while (this.i < this.text.length && /\s/.test(this.text[this.i]!)) this.i++;
  }
}

/** The inside of a JSON string cut anywhere, less an escape sequence the cut left incomplete. */
export function dropCutEscape(raw: string): string {
  const unicode = /\\u[0-9a-fA-F]{0,3}$/.exec(raw);
  const end = unicode ? unicode.index : raw.length;
  let slashes = 0;
  while (slashes < end && raw[end - 1 - slashes] === '\\') slashes++;
  // An even number of backslashes before it: the one that follows starts an escape.
  if (unicode) return slashes % 2 === 0 ? raw.slice(0, end) : raw;
  return slashes % 2 === 1 ? raw.slice(0, -1) : raw;
}

const LEADING_TIMESTAMP = '{"timestamp":"';

/**
 * The time of a line as PostgreSQL writes it (`timestamp` is always its first
 * key), without parsing the whole JSON; undefined for a line not so written.
 */
export function peekTimeMs(text: string): number | undefined {
  if (!text.startsWith(LEADING_TIMESTAMP)) return undefined;
  const close = text.indexOf('"', LEADING_TIMESTAMP.length);
  return close < 0 ? undefined : parsePgTimestamp(text.slice(LEADING_TIMESTAMP.length, close));
}

const PG_TIME = /^(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?)(?: (\S+))?$/;
const NUMERIC_ZONE = /^([+-]\d{2})(?::?(\d{2}))?$/;

/**
 * PostgreSQL's `%m` log time ("2026-11-22 01:54:13.157 UTC") in epoch ms. The
 * zone is log_timezone's abbreviation: UTC/GMT and numeric offsets ("+03",
 * "-0530") are exact; other abbreviations are left to Date.parse, which knows
 * only the North American ones. Undefined when the time cannot be read, so
 * the local driver should keep log_timezone = 'UTC'.
 */
export function parsePgTimestamp(text: string): number | undefined {
  const fast = utcFast(text);
  if (fast !== undefined) return fast;
  const m = PG_TIME.exec(text);
  if (m === null) return undefined;
  const [, date, time, zone = 'UTC'] = m;
  let ms: number;
  if (zone === 'UTC' || zone === 'GMT' || zone === 'UCT' || zone === 'Z') {
    ms = Date.parse(`${date}T${time}Z`);
  } else {
    const numeric = NUMERIC_ZONE.exec(zone);
    ms = numeric
      ? Date.parse(`${date}T${time}${numeric[1]}:${numeric[2] ?? '00'}`)
      : Date.parse(`${date} ${time} ${zone}`);
  }
  return Number.isNaN(ms) ? undefined : ms;
}

/** Separators of "YYYY-MM-DD HH:MM:SS.mmm UTC" by position; the other positions are digits. */
const UTC_LAYOUT = '0000-00-00 00:00:00.000 UTC';

/**
 * The common case, log_timezone = 'UTC', read without regex or Date.parse:
 * a full scan spends most of its time on timestamps otherwise.
 */
function utcFast(text: string): number | undefined {
  if (text.length !== UTC_LAYOUT.length) return undefined;
  for (let i = 0; i < UTC_LAYOUT.length; i++) {
    const c = text.charCodeAt(i);
    const want = UTC_LAYOUT.charCodeAt(i);
    if (want === 0x30 ? c < 0x30 || c > 0x39 : c !== want) return undefined;
  }
  const month = num(text, 5, 7);
  const day = num(text, 8, 10);
  const hour = num(text, 11, 13);
  const minute = num(text, 14, 16);
  const second = num(text, 17, 19);
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 59) {
    return undefined; // left to the slow path, which rejects it
  }
  return Date.UTC(num(text, 0, 4), month - 1, day, hour, minute, second, num(text, 20, 23));
}

/** The number written by the (checked) digits text[from, to). */
function num(text: string, from: number, to: number): number {
  let n = 0;
  for (let i = from; i < to; i++) n = n * 10 + text.charCodeAt(i) - 0x30;
  return n;
}
