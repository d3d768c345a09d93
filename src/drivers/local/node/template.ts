// The template cluster every node is cloned from, made once per data
// directory with initdb and then left stopped. It belongs to the template
// user (postgres); each clone is handed to its service's own OS user. It holds what every service
// has in common: the `postgres` superuser (peer authentication only), role
// `tsdbadmin` and database `tsdb` owned by it. Per-service things (password,
// extensions, settings, certificates) are applied to each clone.
//
// It is built in a staging directory and renamed into place with its
// version marker, so a crashed or concurrent build never leaves half a
// template where a clone could copy it.

import { randomBytes } from 'node:crypto';
import { appendFile, readFile, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '../../../lib/logger.js';
import { withAdmin } from './admin.js';
import { pgHba, pgIdent, renderConf } from '../config/conf.js';
import { run } from '../host/exec.js';
import { PG_MAJOR, type PgInstall } from '../host-check.js';
import type { PrivateTmp } from '../host/confine.js';
import type { Layout } from '../layout.js';
import { ensureOwnedDir, exists, mkdirIn, writeOwned } from './node-files.js';
import type { OsUser } from '../host/os-user.js';
import { postmasterStatus, spawnPostmaster, startFailure, type Spawned } from './postmaster.js';
import { signalAll } from '../host/processes.js';

/**
 * Bump when what the template contains changes; older templates are rebuilt.
 * 2: 1 MB WAL segments (services made from version 1 keep their 16 MB ones).
 */
export const TEMPLATE_VERSION = 2;

export interface TemplateContext {
  layout: Layout;
  pg: PgInstall;
  /** The template user: initdb and the set-up server run as it, and it owns the result. */
  user: OsUser;
  /** OS users allowed to log in as `postgres` over the socket (pg_ident). */
  adminOsUsers: string[];
  /** The set-up server's private directories, as every server's (confine.ts). */
  privateTmp: PrivateTmp | undefined;
  log: Logger;
}

interface Marker {
  version: number;
  pgMajor: number;
  createdAt: string;
}

/**
 * Builds the template in the background on first need. `poll` never blocks:
 * the driver answers `wait` while the build (a couple of seconds, mostly
 * initdb's fsyncs) runs, instead of holding an operation that long.
 */
export class Template {
  private building: Promise<void> | undefined;
  private failure: Error | undefined;
  private ready = false;

  constructor(private readonly ctx: TemplateContext) {}

  /** 'ready', or 'building' (a build is started if none runs); a failed build is thrown once. */
  async poll(): Promise<'ready' | 'building'> {
    if (this.ready) return 'ready';
    this.throwFailure();
    this.building ??= (async () => {
      if (!(await isCurrent(this.ctx.layout))) await buildTemplate(this.ctx);
    })()
      .then(() => void (this.ready = true))
      .catch((err: Error) => {
        this.ctx.log.error({ err: err.message }, 'building the PostgreSQL template failed');
        this.failure = err;
      })
      .finally(() => (this.building = undefined));
    // An existing template is found within a tick; only a real build makes callers wait.
    await Promise.race([this.building, sleep(50)]);
    this.throwFailure();
    return this.ready ? 'ready' : 'building';
  }

  private throwFailure(): void {
    const err = this.failure;
    this.failure = undefined;
    if (err) throw err;
  }

  /** Waits until the template is there (tests and tools; the driver polls). */
  async ensure(): Promise<void> {
    while ((await this.poll()) !== 'ready') await this.building;
  }

  /** Forgets that the template was ready (it went missing under a clone). */
  invalidate(): void {
    this.ready = false;
  }
}

async function isCurrent(layout: Layout): Promise<boolean> {
  try {
    const m = JSON.parse(await readFile(layout.templateMarker, 'utf8')) as Marker;
    return m.version === TEMPLATE_VERSION && m.pgMajor === PG_MAJOR;
  } catch {
    return false;
  }
}

async function buildTemplate(ctx: TemplateContext): Promise<void> {
  const { layout, pg, user, log } = ctx;
  const started = Date.now();
  const tag = randomBytes(4).toString('hex');
  const staging = layout.staging(`template-${tag}`);
  const pgdata = join(staging, 'pgdata');
  const socketDir = join(layout.socketsDir, `tpl-${tag}`);
  let spawned: Spawned | undefined;
  try {
    await mkdirIn(staging, 0o711);
    await ensureOwnedDir(pgdata, user);
    await ensureOwnedDir(socketDir, user);
    // Peer authentication for local connections; SCRAM for TCP (replaced by
    // each node's pg_hba.conf). Checksums catch storage corruption early.
    // --no-sync: initdb would fsync each of its ~1000 files one by one; one
    // syncfs of the finished template (below) makes it durable faster.
    // --wal-segsize=1: WAL in 1 MB segments, not 16. An empty service kept
    // three whole segments in pg_wal (the template's, and one each for its
    // first backup's start and stop), 48 of its 88 MB on disk; with 1 MB
    // ones, 3 MB (docs/decisions.md, Density). pgBackRest, recovery and
    // standbys read the size from pg_control.
    await run(
      join(pg.bin, 'initdb'),
      ['-D', pgdata, '-U', 'postgres', '--auth-local=peer', '--auth-host=scram-sha-256',
        '-E', 'UTF8', '--locale=C.UTF-8', '--data-checksums', '--no-sync',
        '--wal-segsize=1'], // prettier-ignore
      { as: user, cwd: pgdata, timeoutMs: 180_000, diesWithBasin: true },
    );
    await appendFile(
      join(pgdata, 'postgresql.conf'),
      "\n# Basin's settings for this node (size, TLS, archiving, logs) come last and win.\ninclude = 'basin.conf'\n",
    );
    await writeOwned(join(pgdata, 'pg_ident.conf'), pgIdent(ctx.adminOsUsers), user);
    await writeOwned(join(pgdata, 'pg_hba.conf'), pgHba({ allowedCidrs: [] }, []), user);
    // While it is set up, the template listens on a private socket only.
    const port = 5432;
    await writeOwned(
      join(pgdata, 'basin.conf'),
      renderConf({ listen_addresses: '', port: String(port), unix_socket_directories: socketDir }),
      user,
    );

    const logFile = join(staging, 'startup.log');
    spawned = await spawnPostmaster({
      pgBin: pg.bin,
      pgdata,
      logFile,
      user,
      privateTmp: ctx.privateTmp,
      // Unlike a service's, it must not outlive Basin: its staging goes at the next start.
      diesWithBasin: true,
    });
    await waitReady(pgdata, spawned, logFile, user);
    await withAdmin({ socketDir, port, pgdata }, 'postgres', async (c) => {
      // LOGIN but no password: nobody can log in as tsdbadmin until a service
      // sets one. Not a superuser; it may create databases and roles.
      await c.query('CREATE ROLE tsdbadmin LOGIN CREATEDB CREATEROLE');
      await c.query('CREATE DATABASE tsdb OWNER tsdbadmin');
    });
    await stopAndWait(spawned);
    spawned = undefined;

    const marker: Marker = {
      version: TEMPLATE_VERSION,
      pgMajor: PG_MAJOR,
      createdAt: new Date().toISOString(),
    };
    await writeOwned(join(staging, 'template.json'), JSON.stringify(marker) + '\n', user, 0o644);
    await rm(join(staging, 'startup.log'), { force: true });
    // Durable before it is published: a template that a crash left torn
    // would be copied into every new service.
    await run('sync', ['-f', staging]);
    if (await exists(layout.templateDir)) {
      // An outdated template: move it aside (atomically) before replacing it.
      const old = layout.staging(`old-template-${tag}`);
      await rename(layout.templateDir, old);
      await rm(old, { recursive: true, force: true });
    }
    try {
      await rename(staging, layout.templateDir);
    } catch (err) {
      // Another build won the race: use theirs.
      if (!(await isCurrent(layout))) throw err;
    }
    log.info({ ms: Date.now() - started }, 'built the PostgreSQL template cluster');
  } finally {
    if (spawned && !spawned.exit) signalAll([spawned.pid], 'SIGQUIT');
    await rm(staging, { recursive: true, force: true });
    await rm(socketDir, { recursive: true, force: true });
  }
}

async function waitReady(
  pgdata: string,
  spawned: Spawned,
  logFile: string,
  user: OsUser,
): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const st = await postmasterStatus(pgdata);
    if (st.up && st.state === 'ready') return;
    if (spawned.exit || Date.now() > deadline) {
      const why = spawned.exit ? 'exited' : 'did not become ready in 60 s';
      throw new Error(
        `the template's PostgreSQL ${why}: ${await startFailure(logFile, join(pgdata, 'log'), user.uid)}`,
      );
    }
    await sleep(25);
  }
}

/** Fast shutdown (a clean checkpoint: clones start without recovery), immediate if it hangs. */
async function stopAndWait(spawned: Spawned): Promise<void> {
  signalAll([spawned.pid], 'SIGINT');
  const deadline = Date.now() + 60_000;
  while (!spawned.exit) {
    if (Date.now() > deadline) throw new Error("the template's PostgreSQL did not stop in 60 s");
    await sleep(25);
  }
  if (spawned.exit.code !== 0) {
    throw new Error(
      `the template's PostgreSQL exited with ${spawned.exit.code ?? spawned.exit.signal}`,
    );
  }
}
