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
