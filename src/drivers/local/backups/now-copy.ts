// A NOW fork's data: a copy of its parent's data directory, made as a
// PostgreSQL non-exclusive low-level backup
// (https://www.postgresql.org/docs/15/continuous-archiving.html#BACKUP-LOWLEVEL-BASE-BACKUP)
// whose file copy is safe-copy.ts's: every entry opened through its
// directory's descriptor, never through a link the parent's tenant planted
// (its data directory is its to change while the copy runs), and copied
// with a reflink where the file system has them (XFS, btrfs: near-constant
// time), in the kernel elsewhere, at the speed of a plain copy.
//
// On one administrative session to the parent: a temporary physical
// replication slot (it holds the WAL from before the backup started, so no
// checkpoint recycles a segment the copy needs; it goes with the session),
// pg_backup_start with an immediate checkpoint, the copy of every file but
// those PostgreSQL rebuilds, pg_backup_stop, then the WAL from the backup's
// start to its end, straight from the parent's pg_wal (no archive needed).
// The copy then recovers exactly to the end of the backup
// (recovery_target = 'immediate'), promotes, and is the parent as of that
// moment: a transaction still open at the copy is not in it.

import { join } from 'node:path';
import { type AdminBounds, withAdmin } from '../node/admin.js';
import { mkdirIn } from '../node/node-files.js';
import { copyEntries } from '../host/files/safe-copy.js';
import { withSafeDir } from '../host/files/safe-dir.js';

/**
 * What a copy leaves out of the data directory: what PostgreSQL remakes at
 * start (pg_dynshmem, pg_notify, pg_serial, pg_snapshots, pg_stat_tmp,
 * pg_subtrans, pg_replslot, as the documentation lists them), the server's
 * lock and option files, its logs (a fork has logs of its own), its TLS key
 * (a fork gets its own certificate), and pg_wal (copied apart, after the
 * backup ends).
 */
export const NOT_COPIED = new Set([
  'pg_wal',
  'pg_dynshmem',
  'pg_notify',
  'pg_serial',
  'pg_snapshots',
  'pg_stat_tmp',
  'pg_subtrans',
  'pg_replslot',
  'log',
  'postmaster.pid',
  'postmaster.opts',
  'current_logfiles',
  'backup_label',
  'backup_label.old',
  'tablespace_map',
  'server.key',
  'server.crt',
  'standby.signal',
  'recovery.signal',
]);

/** The empty directories PostgreSQL needs where the copy left their contents out. */
export const REMADE_DIRS = [
  'pg_wal',
  'pg_wal/archive_status',
  'pg_dynshmem',
  'pg_notify',
  'pg_serial',
  'pg_snapshots',
  'pg_stat_tmp',
  'pg_subtrans',
  'pg_replslot',
  'log',
];

export interface CopySource {
  pgdata: string;
  socketDir: string;
  port: number;
  bounds: AdminBounds;
  /** The uid of the parent's OS user, which owns everything copied. */
  owner: number;
}

/**
 * Links in a data directory that a copy keeps as links: PostgreSQL's own,
 * the tablespaces of pg_tblspc (never followed: a fork's server, as the
 * fork's user, cannot read its parent's). Any other link is refused.
 */
export const keepTablespaceLink = (rel: string) => /^pg_tblspc\/[^/]+$/.test(rel);

/**
 * Copies the running cluster of `from` into `dest` (an empty directory of
 * root's) as a low-level backup named after `forkId`; returns the
 * backup_label the copy must start from. Aborting `signal` stops the copy
 * and ends the backup (the session closes).
 */
export async function copyRunningCluster(
  from: CopySource,
  dest: string,
  forkId: string,
  signal: AbortSignal,
  lap: (step: string) => void = () => {},
): Promise<{ backupLabel: string }> {
  // The checkpoint and the copy take as long as the data is large: bounded
  // loosely (an hour), and by the abort.
  const bounds: AdminBounds = {
    ...from.bounds,
    statementMs: 600_000,
    queryMs: 610_000,
    callMs: 3_600_000,
  };
  const target = { socketDir: from.socketDir, port: from.port, pgdata: from.pgdata, bounds };
  const copying = { owner: from.owner, signal, keepLink: keepTablespaceLink };
  return withAdmin(target, 'postgres', async (c) => {
    lap('connected to the parent');
    const name = c.escapeLiteral(`basin_fork_${forkId}`);
    await c.query(`SELECT pg_create_physical_replication_slot(${name}, true, true)`);
    lap('slot made');
    const started = await c.query<{ wal: string }>(
      `SELECT pg_walfile_name(pg_backup_start(${c.escapeLiteral(backupLabelName(forkId))}, true)) AS wal`,
    );
    lap('backup started');
    // The data directory as the admin session found it (admin.ts checked
    // that its server runs in it), held by its descriptor from here on.
    return withSafeDir(from.pgdata, from.owner, async (pgdata) => {
      const entries = (await pgdata.names()).filter((n) => !NOT_COPIED.has(n));
      await copyEntries(pgdata, entries, dest, { ...copying, vanishedOk: true });
      lap('files copied');
      // PostgreSQL names the segment after the end too: how many segments a
      // log id holds depends on the cluster's segment size (initdb's
      // --wal-segsize: 1 MB for templates since version 2, 16 MB before).
      const stopped = await c.query<{ wal: string; next: string; labelfile: string }>(
        `SELECT pg_walfile_name(lsn) AS wal,
                pg_walfile_name(lsn + pg_size_bytes(current_setting('wal_segment_size'))::numeric) AS next,
                labelfile
           FROM pg_backup_stop(false)`,
      );
      lap('backup stopped');
      const first = started.rows[0]?.wal ?? '';
      const last = stopped.rows[0]?.wal ?? '';
      for (const dir of REMADE_DIRS) await mkdirIn(join(dest, dir), 0o700);
      // The segments from the backup's start to its end (and the next one: an
      // end on a segment boundary is named after the segment before it), and
      // the timeline history files.
      const wal = await pgdata.dir('pg_wal');
      try {
        const next = stopped.rows[0]?.next ?? '';
        const needed = (await wal.names()).filter(
          (n) =>
            /^[0-9A-F]{8}\.history$/.test(n) ||
            (/^[0-9A-F]{24}$/.test(n) && n >= first && (n <= last || n === next)),
        );
        await copyEntries(wal, needed, join(dest, 'pg_wal'), copying);
        lap('WAL copied');
      } finally {
        await wal.close();
      }
      return { backupLabel: stopped.rows[0]?.labelfile ?? '' };
    });
  });
}

/** The label of a NOW fork's low-level backup, which its backup_label names (fork-check.ts). */
export const backupLabelName = (forkId: string) => `basin fork ${forkId}`;
