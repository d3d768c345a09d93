// What a node's Patroni did, read from its log (patroni.log: Patroni's
// output, root's file, docs/decisions.md "Patroni: a node of an HA service
// across hosts"), for the service's logs: its decisions (took or lost the
// leader lock, demoted itself, a switchover, a rewind or a copy of a
// rejoining node, the synchronous standby it named), never its idle loop
// ("no action. I am …"), its retries or tracebacks.
//
// A line is recognised by a whole-message pattern of Patroni 3.0's own
// texts (ha.py, postgresql/rewind.py, bootstrap.py) and told in Basin's
// words: nothing of the line is copied but the member names it holds, and
// only when they are `node<n>`. Patroni runs as the service's user, which
// can write into its output (/proc/<pid>/fd/1), so a line proves nothing:
// a forged one can only make one of these fixed sentences appear in its own
// service's logs. Lines that carry a connection string (`running pg_rewind
// from dbname=… host=…`) or paths are not recognised, so no password or
// path can pass.

import type { FileHandle } from 'node:fs/promises';
import { open } from 'node:fs/promises';
import { constants } from 'node:fs';
import type { PatroniLogEvent } from '../../../domain/patroni-cluster.js';

export type { PatroniLogEvent };

/** `2026-11-29 04:58:01,234 INFO: message` (patroni-config.ts's log format). */
const LINE =
  /^(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2}),(\d{3}) (INFO|WARNING|ERROR|CRITICAL): (.*)$/;

const MEMBER = /^node\d{1,3}$/;

type Rule = [RegExp, (m: RegExpMatchArray) => Omit<PatroniLogEvent, 'timeMs'> | undefined];

const log = (text: string) => ({ severity: 'LOG' as const, text });
const warning = (text: string) => ({ severity: 'WARNING' as const, text });
const error = (text: string) => ({ severity: 'ERROR' as const, text });
const member = (name: string | undefined, f: (n: string) => Omit<PatroniLogEvent, 'timeMs'>) =>
  name !== undefined && MEMBER.test(name) ? f(name) : undefined;

const RULES: Rule[] = [
  [/^initialized a new cluster$/, () => log('initialized the cluster: primary')],
  [
    /^promoted self to leader by acquiring session lock$/,
    () => warning('promoted to primary (took the leader lock)'),
  ],
  [/^acquired session lock as a leader$/, () => log('runs as the primary (took the leader lock)')],
  [
    /^promoted self to leader because I had the session lock$/,
    () => log('promoted to primary (held the leader lock)'),
  ],
  [/^manual failover: demoting myself$/, () => log('switchover: hands the primary over, demoting')],
  [
    /^manual failover: to (node\d+), i am (node\d+)$/,
    (m) => member(m[1], (to) => log(`switchover to ${to} asked`)),
  ],
  [/^Demoting self \((graceful|offline|immediate|immediate-nolock)\)$/, (m) => warning(`demoting (${m[1]})`)], // prettier-ignore
  [
    /^(demoted self|demoting self) because (DCS is not accessible and I was a leader|failed to update leader lock in DCS)$/,
    (m) =>
      warning(
        `${m[1] === 'demoted self' ? 'demoted' : 'demoting'}: ${m[2] === 'failed to update leader lock in DCS' ? 'could not renew its leader lock in etcd' : 'etcd cannot be reached and it was the primary'}`,
      ),
  ],
  [/^AsyncExecutor is busy, demoting from the main thread$/, () => warning('demoting again (the first demotion is still running)')], // prettier-ignore
  [/^Primary crashed\. Failing over\.$/, () => warning('the primary crashed: failing over')],
  [
    /^removed leader (lock|key) because postgres is not running( as primary)?$/,
    () => warning('gave up the leader lock: PostgreSQL is not running'),
  ],
  [
    /^bootstrapped from leader '(node\d+)'$/,
    (m) => member(m[1], (l) => log(`joined as a standby, copied from ${l}`)),
  ],
  [/^replica has been created using (basebackup|pgbackrest)$/, (m) => log(`copied with ${m[1]}`)],
  [
    /^running pg_rewind from (node\d+)$/,
    (m) => member(m[1], (l) => warning(`rejoins: rewinding from ${l} (pg_rewind)`)),
  ],
  [
    /^pg_rewind exit code=(-?\d+)$/,
    (m) => (m[1] === '0' ? log('pg_rewind done') : error(`pg_rewind failed (exit code ${m[1]})`)),
  ],
  [
    /^Failed to rewind from healty primary: (node\d+)$/,
    (m) => member(m[1], (l) => error(`pg_rewind failed from the primary ${l}`)),
  ],
  [
    /^remove_data_directory_on_rewind_failure is set\. removing\.\.\.$/,
    () => error('pg_rewind failed: its data directory is removed, to be copied afresh'),
  ],
  [
    /^Synchronous standby status assigned to \[((?:'node\d+'(?:, )?)*)\]$/,
    (m) => {
      const names = [...(m[1] ?? '').matchAll(/'(node\d+)'/g)].map((x) => x[1] as string);
      return log(`synchronous standby: ${names.length > 0 ? names.join(', ') : 'none'}`);
    },
  ],
  [/^Disabled synchronous replication$/, () => log('synchronous replication off')],
];

/** The event a line of patroni.log tells; undefined for every other line. */
export function parsePatroniLine(line: string): PatroniLogEvent | undefined {
  const m = LINE.exec(line);
  if (!m) return undefined;
  const [, y, mo, d, h, mi, s, ms, , message] = m;
  const timeMs = new Date(+y!, +mo! - 1, +d!, +h!, +mi!, +s!, +ms!).getTime();
  if (Number.isNaN(timeMs)) return undefined;
  for (const [pattern, tell] of RULES) {
    const hit = pattern.exec(message!);
    if (!hit) continue;
    const told = tell(hit);
    return told && { timeMs, ...told };
  }
  return undefined;
}

/** The events of a whole text (lines), oldest first. */
export function patroniEventsOf(text: string): PatroniLogEvent[] {
  const out: PatroniLogEvent[] = [];
  for (const line of text.split('\n')) {
    const e = parsePatroniLine(line);
    if (e) out.push(e);
  }
  return out;
}

/** The most a first reading of a log looks back, and the events kept per node. */
const TAIL_BYTES = 1024 * 1024;
const KEPT = 200;
/**
 * A log past this is emptied once it has been read to its end. Patroni
 * writes a line every loop (every 2 s, ~3 MB a day with its tracebacks),
 * and nothing else would ever shorten the file: a node that ran for a year
 * would hold a gigabyte of "no action" lines.
 */
const MAX_LOG_BYTES = 8 * 1024 * 1024;

/**
 * Each node's log read as it grows: the first call reads its last MiB, a
 * later one only what was appended since (a file that shrank, replaced, is
 * read anew). Patroni writes a line every loop (2 s), so a call between
 * two inspections of the control plane reads a few hundred bytes.
 *
 * A log read to its end and longer than `maxBytes` is truncated to nothing:
 * Patroni's output was opened to append (spawnTenantDaemon), so its next
 * line lands at the start, and the events read so far are kept here. A line
 * written between the last look at the file's size and the truncation is
 * lost: a window of microseconds, once every few days of a node's life, for
 * a file kept for its rare decision lines.
 */
export class PatroniLogTail {
  private readonly seen = new Map<string, { size: number; events: PatroniLogEvent[] }>();

  constructor(private readonly maxBytes = MAX_LOG_BYTES) {}

  /** The node's events after `sinceMs` (all kept when undefined), oldest first, at most `max`. */
  async events(path: string, sinceMs: number | undefined, max = 50): Promise<PatroniLogEvent[]> {
    let fh: FileHandle;
    try {
      // Root's file in root's directory; not followed if it were a link.
      fh = await open(path, constants.O_RDWR | constants.O_NOFOLLOW);
    } catch {
      return [];
    }
    try {
      const size = (await fh.stat()).size;
      const was = this.seen.get(path);
      const from = was && was.size <= size ? was.size : Math.max(0, size - TAIL_BYTES);
      const kept = was && was.size <= size ? was.events : [];
      const buf = Buffer.alloc(Math.min(size - from, TAIL_BYTES));
      const start = size - buf.length;
      await fh.read(buf, 0, buf.length, start);
      // Whole lines only: a read that starts inside a line (the look back)
      // drops it; the unended last line is read again next time.
      const first = start > 0 && start !== was?.size ? buf.indexOf(0x0a) + 1 : 0;
      const last = buf.lastIndexOf(0x0a) + 1;
      let events = kept;
      if (first > 0 || start === 0 || start === was?.size) {
        if (last > first) {
          const fresh = patroniEventsOf(buf.subarray(first, last).toString('utf8'));
          events = [...kept, ...fresh].slice(-KEPT);
        }
        if (last > 0) this.seen.set(path, { size: start + last, events });
      }
      // Read to its end (a whole last line) and nothing written since: empty it.
      if (size > this.maxBytes && start + last === size && (await fh.stat()).size === size) {
        await fh.truncate(0);
        this.seen.set(path, { size: 0, events });
      }
      const after = events.filter((e) => sinceMs === undefined || e.timeMs >= sinceMs);
      return after.slice(-max);
    } finally {
      await fh.close();
    }
  }
}
