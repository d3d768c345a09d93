// Whether a standby can follow its primary onto the primary's timeline, the
// way Patroni decides it (patroni/postgresql/rewind.py): a failover
// promotes a standby, which starts a new timeline at the end of the WAL it
// had received (the switchpoint, in the new timeline's history file). A
// standby still on the old timeline follows as long as it has not gone
// past that point; one that received or replayed WAL beyond it (a read
// replica streams asynchronously, so it may have got more of the old
// primary's WAL than the standby that was promoted) holds records the new
// primary never had, and PostgreSQL refuses to switch ("new timeline 2
// forked off current database system timeline 1 before current recovery
// point"): it stays behind for good, and must be rewound or rebuilt.
//
// A standby's own timeline and position come from IDENTIFY_SYSTEM on a
// replication connection to it: on a standby it answers the timeline it
// replays and the furthest of what it received and replayed
// (https://www.postgresql.org/docs/15/protocol-replication.html).
// https://www.postgresql.org/docs/15/continuous-archiving.html#BACKUP-TIMELINES

import { join } from 'node:path';
import { type AdminTarget, withAdmin } from '../node/admin.js';
import { withSafeDir } from '../host/files/safe-dir.js';

/** An LSN ("16/B374D848") as a number of bytes; undefined when it is not one. */
export function lsnBytes(lsn: string): bigint | undefined {
  const m = /^([0-9A-Fa-f]{1,8})\/([0-9A-Fa-f]{1,8})$/.exec(lsn.trim());
  if (!m) return undefined;
  return (BigInt(`0x${m[1]}`) << 32n) + BigInt(`0x${m[2]}`);
}

/** One line of a timeline history file: the parent timeline and where the child forked off it. */
export interface HistoryEntry {
  parent: number;
  switchpoint: string;
}

/** The entries of a history file ("1\t0/5000060\tno recovery target specified"), in order. */
export function parseHistory(text: string): HistoryEntry[] {
  const out: HistoryEntry[] = [];
  for (const line of text.split('\n')) {
    const cols = line.trim().split(/\s+/);
    if (cols.length < 2 || cols[0]?.startsWith('#')) continue;
    const parent = Number(cols[0]);
    const switchpoint = cols[1] ?? '';
    if (!Number.isInteger(parent) || parent <= 0 || lsnBytes(switchpoint) === undefined) continue;
    out.push({ parent, switchpoint });
  }
  return out;
}

/** Where a standby stands: the timeline it replays, and how far it got on it. */
export interface WalPosition {
  timeline: number;
  lsn: string;
}

/**
 * Why a standby at `local` cannot follow a primary on `primaryTimeline`
 * whose history is `history`; undefined when it can (same timeline, or
 * not past the point where the primary's timeline forked off its own).
 */
export function divergence(
  local: WalPosition,
  primaryTimeline: number,
  history: readonly HistoryEntry[],
): string | undefined {
  if (local.timeline === primaryTimeline) return undefined;
  if (local.timeline > primaryTimeline) {
    return `it is on timeline ${local.timeline}, after the primary's ${primaryTimeline}`;
  }
  const fork = history.find((h) => h.parent === local.timeline);
  if (!fork) {
    return `its timeline ${local.timeline} is not in the history of the primary's timeline ${primaryTimeline}`;
  }
  const at = lsnBytes(local.lsn);
  const end = lsnBytes(fork.switchpoint);
  if (at === undefined || end === undefined) return `its position ${local.lsn} is unreadable`;
  if (at <= end) return undefined;
  return `it got WAL up to ${local.lsn} on timeline ${local.timeline}, past ${fork.switchpoint}, where the primary's timeline forked off it`;
}

/**
 * IDENTIFY_SYSTEM over the administrative door, as a replication
 * connection (`replication=database`, which pg_hba matches like any
 * connection to a database: no replication rule for `postgres` needed).
 */
export async function walPosition(target: AdminTarget): Promise<WalPosition> {
  return withAdmin(
    target,
    'postgres',
    async (c) => {
      const { rows } = await c.query<{ timeline: string | number; xlogpos: string }>(
        'IDENTIFY_SYSTEM',
      );
      const row = rows[0];
      const timeline = Number(row?.timeline);
      if (!row || !Number.isInteger(timeline) || lsnBytes(row.xlogpos) === undefined) {
        throw new Error('IDENTIFY_SYSTEM gave no timeline and position');
      }
      return { timeline, lsn: row.xlogpos };
    },
    { replication: true },
  );
}

/** The history file of `timeline` on the server of `target` (empty for timeline 1, which has none). */
export async function timelineHistory(
  target: AdminTarget,
  timeline: number,
): Promise<HistoryEntry[]> {
  if (timeline <= 1) return [];
  const file = `pg_wal/${timeline.toString(16).toUpperCase().padStart(8, '0')}.history`;
  return withAdmin(target, 'postgres', async (c) => {
    const { rows } = await c.query<{ t: string | null }>(
      `SELECT pg_read_file(${c.escapeLiteral(file)}, 0, 1048576, true) AS t`,
    );
    return parseHistory(rows[0]?.t ?? '');
  });
}

/**
 * The newest timeline a data directory knows of, from the history files in
 * its pg_wal (a promotion writes its new timeline's before it accepts
 * writes): cheap, no connection, for deciding whether to look closer. The
 * service's user owns pg_wal: a link there is not followed (safe-dir.ts),
 * and another directory's names are never taken for its own.
 */
export async function latestTimeline(pgdata: string): Promise<number> {
  let newest = 1;
  try {
    const names = await withSafeDir(join(pgdata, 'pg_wal'), undefined, (wal) => wal.names());
    for (const name of names) {
      const m = /^([0-9A-F]{8})\.history$/.exec(name);
      if (m) newest = Math.max(newest, parseInt(m[1] as string, 16));
    }
  } catch {
    // No data directory: timeline 1, and the closer look says more.
  }
  return newest;
}

/**
 * Why the standby behind `standby` cannot follow the primary behind
 * `primary`; undefined when it can. Throws when either does not answer.
 */
export async function standbyDivergence(
  standby: AdminTarget,
  primary: AdminTarget,
): Promise<{ why: string | undefined; primaryTimeline: number }> {
  const theirs = await walPosition(primary);
  const mine = await walPosition(standby);
  const history = await timelineHistory(primary, theirs.timeline);
  return { why: divergence(mine, theirs.timeline, history), primaryTimeline: theirs.timeline };
}
