// Making a service's WAL reach the archive up to a moment, for point-in-
// time forks. PostgreSQL archives a WAL segment once it is full (or after
// archive_timeout), so the last minutes of a service are in no archive; and
// a recovery to a time stops at the first commit after that time, failing
// ("recovery ended before configured recovery target was reached") when
// there is none, as in an idle database. So before a fork to a recent
// moment is restored, and before a service is stopped, Basin commits a
// transaction of its own (a commit record dated now) and switches to a new
// segment, which the archiver then pushes: every moment up to that commit
// is restorable from the archive alone.

import { type Progress, wait } from '../../../domain/progress.js';
import type { Logger } from '../../../lib/logger.js';
import { type AdminTarget, withAdmin } from './admin.js';
import type { NodeState } from './node-state.js';

/** How long a stop waits for the archiver to take the last WAL. */
const ARCHIVE_BEFORE_STOP_MS = 30_000;

/**
 * Commits an empty transaction that has a transaction id (so a commit record
 * is written, dated now) and switches the WAL to a new segment; returns the
 * name of the segment that holds the commit.
 */
export async function markWal(target: AdminTarget): Promise<string> {
  return withAdmin(target, 'postgres', async (c) => {
    await c.query('SELECT txid_current()');
    const { rows } = await c.query<{ wal: string }>(
      'SELECT pg_walfile_name(pg_switch_wal()) AS wal',
    );
    return rows[0]?.wal ?? '';
  });
}

/** Whether the server has archived `segment` (pg_stat_archiver; names of one timeline sort in order). */
export async function archived(target: AdminTarget, segment: string): Promise<boolean> {
  return withAdmin(target, 'postgres', async (c) => {
    const { rows } = await c.query<{ last: string | null }>(
      'SELECT last_archived_wal AS last FROM pg_stat_archiver',
    );
    // A segment's name, or a backup history file's (<segment>.<offset>.backup).
    const last = /^[0-9A-F]{24}/.exec(rows[0]?.last ?? '')?.[0];
    return last !== undefined && last >= segment;
  });
}

/**
 * One step before a stop of a ready server: everything committed so far
 * into the archive, so that a stopped service can be forked to any moment
 * before it stopped from its repository alone. A commit and a segment
 * switch, then up to 30 s for the archiver (`wait` meanwhile); once it is
 * archived, `walMarkedAt` records the moment taken before that commit
 * (fork-restore.ts: a later moment is the data directory as it stopped).
 * Undefined when the stop may go on, which it always does in the end.
 */
export async function archiveBeforeStop(
  target: AdminTarget,
  state: NodeState,
  save: () => Promise<void>,
  log: Logger,
): Promise<Progress | undefined> {
  try {
    if (!state.walMark) {
      const at = Date.now();
      state.walMark = { at, segment: await markWal(target) };
      delete state.walMarkedAt;
      await save();
    }
    const { at, segment } = state.walMark;
    const done = await archived(target, segment);
    if (!done && Date.now() - at < ARCHIVE_BEFORE_STOP_MS) {
      return wait(100, 'archiving the WAL before stopping');
    }
    if (done) state.walMarkedAt = at;
  } catch (err) {
    // The stop goes on: moments since the last archived segment are then
    // only in the data directory.
    log.warn({ err: (err as Error).message }, 'could not archive the WAL before stopping');
  }
  delete state.walMark;
  await save();
  return undefined;
}
