// Which PgBouncer the poolers run. scripts/setup-host.sh builds trixie's
// (1.24) from its source package into BASIN_PGBOUNCER, beside bookworm's
// package (1.18, /usr/sbin/pgbouncer), because several processes can serve
// one port only from 1.19 on: so_reuseport spreads the clients over them,
// and peering (`peer_id`, `[peers]`) forwards a cancel request that reaches
// the wrong one to the process that holds the query. Without Basin's
// build, a pooler is bookworm's one process, as before, and the log says so
// once (docs/decisions.md, "Several PgBouncer processes a pooler").

import { constants } from 'node:fs';
import { access } from 'node:fs/promises';
import { run } from '../host/exec.js';

/** Where setup-host.sh installs Basin's PgBouncer. */
export const BASIN_PGBOUNCER = '/usr/local/lib/basin/pgbouncer/bin/pgbouncer';
/** Debian bookworm's. */
export const DEBIAN_PGBOUNCER = '/usr/sbin/pgbouncer';

export interface PgbouncerInstall {
  path: string;
  /** "1.24.1" */
  version: string;
  /** Whether it can run several processes on one port, peered (≥ 1.19). */
  peering: boolean;
}

let found: Promise<PgbouncerInstall> | undefined;

/**
 * The PgBouncer to run, looked for once per Basin process: Basin's build
 * when it runs and is 1.19 or later, else Debian's, with `note` told why.
 */
export function pgbouncerInstall(note: (msg: string) => void): Promise<PgbouncerInstall> {
  found ??= find(note);
  return found;
}

async function find(note: (msg: string) => void): Promise<PgbouncerInstall> {
  const ours = await probe(BASIN_PGBOUNCER);
  if (ours?.peering) return ours;
  const debian = (await probe(DEBIAN_PGBOUNCER)) ?? {
    path: DEBIAN_PGBOUNCER,
    version: 'unknown',
    peering: false,
  };
  note(
    `${ours ? `${BASIN_PGBOUNCER} is PgBouncer ${ours.version}, too old to peer` : `no PgBouncer at ${BASIN_PGBOUNCER}`}` +
      ` (scripts/setup-host.sh builds it): each connection pooler runs as one process of ${debian.path} (${debian.version})`,
  );
  return { ...debian, peering: false };
}

async function probe(path: string): Promise<PgbouncerInstall | undefined> {
  try {
    await access(path, constants.X_OK);
    const stdout = await run(path, ['--version'], { timeoutMs: 10_000 });
    const version = /PgBouncer (\d+)\.(\d+)(?:\.(\d+))?/.exec(stdout);
    if (!version) return undefined;
    const [major, minor] = [Number(version[1]), Number(version[2])];
    return {
      path,
      version: version.slice(1).filter(Boolean).join('.'),
      peering: peers(major, minor),
    };
  } catch {
    return undefined;
  }
}

/** Whether PgBouncer major.minor has peering (1.19+). */
export function peers(major: number, minor: number): boolean {
  return major > 1 || (major === 1 && minor >= 19);
}
