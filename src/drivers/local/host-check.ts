// What the host must provide before the local driver can run a database:
// PostgreSQL 15's server binaries, pgBackRest (WAL archiving, backups,
// restores), the extensions service types ask for, and openssl for
// certificates. The
// check runs once at start-up and names everything that is missing at once,
// with the command that installs it, instead of failing on the first create.

import { constants } from 'node:fs';
import { access } from 'node:fs/promises';
import { join } from 'node:path';
import { READ_ONLY_LIBRARY } from './config/conf.js';
import { HostCheckError } from './errors.js';
import { run } from './host/exec.js';
import { PGBACKREST } from './config/pgbackrest.js';

export const PG_MAJOR = 15;
export const DEFAULT_PG_BIN = `/usr/lib/postgresql/${PG_MAJOR}/bin`;
export const DEFAULT_PG_SHARE = `/usr/share/postgresql/${PG_MAJOR}`;

export { HostCheckError };

export interface PgInstall {
  /** Server binaries (postgres, initdb). */
  bin: string;
  /** Shared data (extension/*.control). */
  share: string;
  /** Loadable modules (*.so); Debian keeps them beside bin/, in lib/. */
  lib: string;
  /** pgBackRest's command (found on the PATH by default). */
  pgbackrest: string;
}

export function pgInstall(
  pgBin = DEFAULT_PG_BIN,
  pgShare = DEFAULT_PG_SHARE,
  pgbackrest = PGBACKREST,
): PgInstall {
  return { bin: pgBin, share: pgShare, lib: join(pgBin, '..', 'lib'), pgbackrest };
}

/** Extensions the driver may create, by the name CREATE EXTENSION takes. */
export const EXTENSIONS = ['timescaledb', 'vector'] as const;

export interface HostReport {
  /** `postgres --version`, e.g. "postgres (PostgreSQL) 15.14 (Debian 15.14-0+deb12u1)". */
  postgresVersion: string;
}

const SETUP_HINT = 'run: sudo scripts/setup-host.sh';

/** Checks everything at once; throws one HostCheckError listing every missing piece. */
export async function checkHost(pg: PgInstall): Promise<HostReport> {
  const missing: string[] = [];
  const need = async (path: string, what: string, mode = constants.R_OK) => {
    try {
      await access(path, mode);
      return true;
    } catch {
      missing.push(`${what} (${path})`);
      return false;
    }
  };

  let postgresVersion = '';
  const hasPostgres = await need(
    join(pg.bin, 'postgres'),
    `PostgreSQL ${PG_MAJOR} server`,
    constants.X_OK,
  );
  await need(join(pg.bin, 'initdb'), `PostgreSQL ${PG_MAJOR} initdb`, constants.X_OK);
  if (hasPostgres) {
    try {
      postgresVersion = (await run(join(pg.bin, 'postgres'), ['--version'])).trim();
      if (!new RegExp(`\\(PostgreSQL\\) ${PG_MAJOR}\\.`).test(postgresVersion)) {
        missing.push(
          `PostgreSQL ${PG_MAJOR} (${join(pg.bin, 'postgres')} is "${postgresVersion}")`,
        );
      }
    } catch (err) {
      missing.push(`a working PostgreSQL ${PG_MAJOR} server (${(err as Error).message})`);
    }
  }
  // WAL archiving, backups and forks use pgBackRest (pgbackrest.ts).
  try {
    const version = (await run(pg.pgbackrest, ['version'])).trim();
    if (!/^pgBackRest 2\./.test(version)) missing.push(`pgBackRest 2 (found "${version}")`);
  } catch {
    missing.push(
      `pgBackRest (${pg.pgbackrest}: WAL archiving, backups and forks; Debian package pgbackrest)`,
    );
  }
  for (const ext of EXTENSIONS) {
    const label = ext === 'vector' ? 'the pgvector extension' : `the ${ext} extension`;
    await need(join(pg.share, 'extension', `${ext}.control`), label);
    await need(join(pg.lib, `${ext}.so`), `${label} library`);
  }
  // Every node preloads it (conf.ts): without it no server starts.
  await need(
    join(pg.lib, `${READ_ONLY_LIBRARY}.so`),
    "Basin's read-only library (extensions/basin_readonly)",
  );
  try {
    await run('openssl', ['version']);
  } catch {
    missing.push('openssl (the command line tool; it issues the TLS certificates)');
  }

  if (missing.length > 0) {
    throw new HostCheckError(
      'The local driver cannot run databases on this host; missing:\n' +
        missing.map((m) => `  - ${m}`).join('\n') +
        `\n${SETUP_HINT} (or point the driver at another installation with pgBin/pgShare).`,
    );
  }
  return { postgresVersion };
}
