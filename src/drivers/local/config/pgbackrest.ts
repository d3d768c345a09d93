// pgBackRest (https://pgbackrest.org, Debian's package): one stanza per
// service, named after its id, in a repository of its own under
// <dataDir>/local/backup/<id>/ (layout.ts). Pure builders for its
// configuration and a reader of its backup list here; running it is
// backups.ts's and fork-restore.ts's.
//
// Everything pgBackRest writes (repository, spool, locks, logs) lies in the
// service's own directories, owned by its OS user, and pgBackRest only
// ever runs as that user, confined like its server (confine.ts): the
// archiver starts it from the postmaster, and Basin starts backups, expiry
// and restores through the same wrapper. So what a tenant can do to its
// repository (anything: it is that user) stays in its repository, and
// nothing of pgBackRest's defaults (/var/lib/pgbackrest, /tmp/pgbackrest,
// /var/log/pgbackrest) is shared between services.
//
// That is a local repository. With repository servers (--repository-servers),
// a service's repository belongs to an OS user of its own instead, and its
// configurations are repository/repo-conf.ts's.

import type { Size } from '../../../domain/types.js';
import type { BackupInfo } from '../../driver.js';

export const PGBACKREST = 'pgbackrest';

export interface StanzaConf {
  stanza: string;
  repo: string;
  spool: string;
  lock: string;
  log: string;
  pgdata: string;
  socketDir: string;
  port: number;
  /** Processes a backup or restore may use (process-max). */
  processMax: number;
}

/**
 * At most one process for a shared service (the issue's bound), half the
 * CPUs of a dedicated one, at most four: a backup must not starve the
 * database it copies.
 */
export function backupProcesses(size: Size): number {
  if (size.shared) return 1;
  return Math.min(4, Math.max(1, Math.floor(size.cpuMillis / 2000)));
}

/**
 * How a full backup's checkpoint runs: `--start-fast` (immediate: every
 * dirty buffer written and every file fsynced at once) or
 * `--no-start-fast` (spread, as PostgreSQL paces its own checkpoints: the
 * backup first waits checkpoint_completion_target x checkpoint_timeout,
 * 4.5 minutes, whenever anything is dirty). Immediate for a service's first
 * backup (until it completes, LAST_SNAPSHOT and PITR forks are refused, and
 * a user may be waiting for them) and for a shared service (its
 * shared_buffers are 32 MB, so an immediate checkpoint writes at most that;
 * what it fsyncs, the kernel's dirty pages, a spread one fsyncs at its end
 * as well, and both move the redo point, after which every first change to
 * a page writes it whole into the WAL: bench/README.md, backup-write).
 * Spread for the later backups of a dedicated size, whose shared_buffers
 * are a quarter of its memory: writing gigabytes at once would stall its
 * commits, and nobody waits for a scheduled backup.
 */
export function backupCheckpoint(
  size: Size,
  firstBackup: boolean,
): '--start-fast' | '--no-start-fast' {
  return firstBackup || size.shared ? '--start-fast' : '--no-start-fast';
}

/**
 * The configuration of a stanza. Archiving is asynchronous: the archiver's
 * archive-push only queues the segment in the spool directory and a
 * background pgBackRest pushes it, so a slow repository never holds back
 * the server's WAL. Whether a full backup starts with an immediate or a
 * spread checkpoint is chosen per backup (backupCheckpoint; the setting
 * here is only the default). Backups are compressed with lz4 (the cheapest
 * of pgBackRest's compressors in CPU), bundled (repo1-bundle: the ~1,000
 * small files of a small cluster go into a few bundle files, so a fork
 * copies a few files out of the repository instead of each of them, which
 * halved a small PITR fork's time: bench/README.md, fork-pitr), and leave
 * out the server's own log directory (a fork starts with logs of its own).
 * pgBackRest never expires anything on its own (its full-backup count is
 * out of reach): Basin expires by the recovery window (backups.ts).
 */
export function renderStanzaConf(c: StanzaConf): string {
  const lines = [
    '# Written by Basin; edits are overwritten.',
    '[global]',
    `repo1-path=${c.repo}`,
    'repo1-retention-full-type=count',
    'repo1-retention-full=9999999',
    `spool-path=${c.spool}`,
    `lock-path=${c.lock}`,
    `log-path=${c.log}`,
    'log-level-console=warn',
    'log-level-stderr=off',
    'log-level-file=warn',
    'compress-type=lz4',
    'repo1-bundle=y',
    'archive-async=y',
    'start-fast=y',
    'exclude=log/',
    `process-max=${c.processMax}`,
    '',
    '[global:archive-push]',
    'process-max=1',
    '',
    `[${c.stanza}]`,
    `pg1-path=${c.pgdata}`,
    `pg1-socket-path=${c.socketDir}`,
    `pg1-port=${c.port}`,
    // The superuser, by peer authentication over the socket (pg_ident maps the service's user).
    'pg1-user=postgres',
    '',
  ];
  for (const line of lines) checkConfLine(line);
  return lines.join('\n');
}

/** pgBackRest's configuration is line based: a value holding a line break would be two settings. */
export function checkConfLine(line: string): void {
  if (/[\n\r\0]/.test(line)) throw new Error(`unusable pgBackRest setting ${JSON.stringify(line)}`);
}

/**
 * The archive_command of a service: archive-push of its stanza, run by the
 * archiver through /bin/sh, so the configuration's path is quoted for it.
 */
export function archiveCommand(bin: string, conf: string, stanza: string): string {
  return `${shellQuote(bin)} ${shellQuote(`--config=${conf}`)} --stanza=${stanza} archive-push %p`;
}

/** The restore_command that fetches WAL from a stanza during recovery. */
export function restoreCommand(bin: string, conf: string, stanza: string): string {
  return `${shellQuote(bin)} ${shellQuote(`--config=${conf}`)} --stanza=${stanza} archive-get %f "%p"`;
}

/** In a fork's source-pg directory: the parent's and the fork's identifiers, 8 bytes each, as WAL holds them. */
export const PARENT_ID_FILE = 'parent-id';
export const FORK_ID_FILE = 'fork-id';

/**
 * The restore_command of a fork that recovers through its parent's
 * archived WAL but has an identifier of its own (fork-check.ts). archive-get
 * runs in the fork's source-pg directory, its pg1-path (pgBackRest wants
 * the two to be the same), where it finds the parent's control file, and
 * so the parent's identifier, to look the WAL up by. Then each segment
 * fetched whose first page names the parent's identifier
 * (XLogLongPageHeaderData.xlp_sysid, 8 bytes at offset 24) gets the
 * fork's, in place; a segment that names another fails the fetch, so it is
 * never replayed. History files carry no identifier. `cmp` and `dd` read
 * the identifiers from files of that directory, so that the command holds
 * no backslash (postgresql.conf would take one for an escape).
 */
export function forkRestoreCommand(
  bin: string,
  conf: string,
  stanza: string,
  pgDir: string,
): string {
  return (
    `p="$PWD/%p" && cd ${shellQuote(pgDir)} && ` +
    `${shellQuote(bin)} ${shellQuote(`--config=${conf}`)} --stanza=${stanza} archive-get %f "$p" && ` +
    `case %f in *.history) ;; *) cmp -s -n 8 -i 24:0 "$p" ${PARENT_ID_FILE} && ` +
    `dd if=${FORK_ID_FILE} of="$p" bs=8 seek=3 count=1 conv=notrunc status=none ;; esac`
  );
}

/** A word for /bin/sh: single-quoted, its own single quotes escaped. */
export function shellQuote(word: string): string {
  return `'${word.replace(/'/g, `'\\''`)}'`;
}

/**
 * The system identifier of the stanza's current cluster, as backup.info
 * gives it (`[db]`, `db-system-id`); undefined when it gives none. The
 * tenant can write anything there: this is only compared (fork-check.ts).
 */
export function backupInfoSystemId(text: string): string | undefined {
  let section = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    const head = /^\[(.+)\]$/.exec(line);
    if (head) {
      section = head[1] as string;
      continue;
    }
    const m = /^db-system-id=(\d{1,20})$/.exec(line);
    if (section === 'db' && m) return m[1];
  }
  return undefined;
}

/** A backup as backup.info records it, with the WAL range that makes it consistent. */
export interface RepoBackup extends BackupInfo {
  /** The first and last WAL segment of the backup (archive-start, archive-stop). */
  walStart: string;
  walStop: string;
}

const LABEL = /^\d{8}-\d{6}F$/;
const SEGMENT = /^[0-9A-F]{24}$/;

/**
 * The complete full backups listed in a stanza's backup.info, oldest first.
 * The file belongs to the service's user, who may have written anything
 * into it: every line that is not a well-formed full backup is skipped, and
 * so are backups that errored. `startedAt` is when the backup started;
 * `stoppedAt` the second after it ended (pgBackRest records whole seconds,
 * and a restore to a moment before the backup's end cannot be consistent).
 */
export function parseBackupInfo(text: string): RepoBackup[] {
  const out: RepoBackup[] = [];
  let section = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    const head = /^\[(.+)\]$/.exec(line);
    if (head) {
      section = head[1] as string;
      continue;
    }
    if (section !== 'backup:current') continue;
    const eq = line.indexOf('=');
    const label = line.slice(0, eq);
    if (eq < 0 || !LABEL.test(label)) continue;
    let v: Record<string, unknown>;
    try {
      v = JSON.parse(line.slice(eq + 1)) as Record<string, unknown>;
    } catch {
      continue;
    }
    const start = v['backup-timestamp-start'];
    const stop = v['backup-timestamp-stop'];
    const walStart = v['backup-archive-start'];
    const walStop = v['backup-archive-stop'];
    if (
      v['backup-type'] !== 'full' ||
      v['backup-error'] === true ||
      !Number.isSafeInteger(start) ||
      !Number.isSafeInteger(stop) ||
      (stop as number) < (start as number) ||
      typeof walStart !== 'string' ||
      typeof walStop !== 'string' ||
      !SEGMENT.test(walStart) ||
      !SEGMENT.test(walStop)
    ) {
      continue;
    }
    out.push({
      label,
      startedAt: new Date((start as number) * 1000).toISOString(),
      stoppedAt: new Date(((stop as number) + 1) * 1000).toISOString(),
      walStart,
      walStop,
    });
  }
  return out.sort((a, b) => (a.label < b.label ? -1 : a.label > b.label ? 1 : 0));
}
