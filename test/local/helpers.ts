// Helpers for the local driver's tests: real PostgreSQL clusters on this host.

import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { TestContext } from 'node:test';
import pg from 'pg';
import type { Driver, ServiceSpec } from '../../src/drivers/driver.js';
import type { ServiceType, Size } from '../../src/domain/types.js';
import { removeInstallationLeftovers } from '../harness/clean-up.js';
import { seedTemplate } from '../harness/shared-template.js';
import type { UidRange } from '../../src/drivers/local/host/uids.js';
import { scramVerifier } from '../../src/lib/secrets.js';

export const SHARED: Size = { shared: true, cpuMillis: 0, memoryGbs: 0 };
export const SMALL: Size = { shared: false, cpuMillis: 500, memoryGbs: 2 };

/** A data directory for one test file; removed by the caller (after deleting its services). */
/**
 * A fresh data directory for a driver. `sharedTemplate`: with a copy of the
 * run's PostgreSQL template in it (test/harness/shared-template.ts), which
 * the driver finds current and keeps, instead of building its own (a few
 * seconds of initdb) — for tests whose subject is not the template.
 */
export function makeDataDir(options: { sharedTemplate?: boolean } = {}): string {
  const dir = mkdtempSync(join(tmpdir(), 'basin-local-'));
  if (options.sharedTemplate) seedTemplate(dir);
  return dir;
}

export function removeDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}

/** A TCP port nobody listens on right now (the kernel picks it). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '0.0.0.0', () => {
      const addr = srv.address();
      srv.close(() => resolve(typeof addr === 'object' && addr ? addr.port : 0));
    });
  });
}

let counter = 0;
/** A service id like the store makes (10 lowercase alphanumerics). */
export function serviceId(): string {
  const rand = Math.random().toString(36).slice(2, 8);
  return `t${(counter++).toString(36).padStart(3, '0')}${rand}`.slice(0, 10).padEnd(10, '0');
}

export async function makeSpec(
  type: ServiceType,
  password: string,
  overrides: Partial<ServiceSpec> = {},
): Promise<ServiceSpec> {
  const port = overrides.port ?? (await freePort());
  return {
    serviceId: serviceId(),
    projectId: 'p000000000',
    type,
    vector: type === 'VECTOR',
    size: SHARED,
    environment: 'DEV',
    running: true,
    port,
    passwordVerifier: scramVerifier(password),
    pooler: { enabled: false, port: null },
    allowedCidrs: [],
    ha: { replicaCount: 0, syncReplicaCount: 0 },
    nodes: [{ index: 0, role: 'primary', port }],
    source: { kind: 'empty' },
    createdAt: new Date().toISOString(),
    ...overrides,
  };
}

/** Calls applyService as the engine would, honouring `wait`, until DONE; returns the reasons seen. */
export async function applyUntilDone(
  driver: Driver,
  spec: ServiceSpec,
  timeoutMs = 60_000,
): Promise<string[]> {
  const reasons: string[] = [];
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const p = await driver.applyService(spec);
    if (p.done) return reasons;
    if (reasons.at(-1) !== p.reason) reasons.push(p.reason);
    if (Date.now() > deadline) throw new Error(`apply not done after ${timeoutMs} ms: ${reasons}`);
    await sleep(p.retryAfterMs);
  }
}

export async function deleteUntilDone(driver: Driver, id: string, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const p = await driver.deleteService(id);
    if (p.done) return;
    if (Date.now() > deadline) throw new Error(`delete not done after ${timeoutMs} ms`);
    await sleep(p.retryAfterMs);
  }
}

/** A TLS connection as tsdbadmin to tsdb on the service's port; the caller ends it. */
export async function connect(
  spec: ServiceSpec,
  password: string,
  ssl: pg.ClientConfig['ssl'] = { rejectUnauthorized: false },
): Promise<pg.Client> {
  const client = new pg.Client({
    host: '127.0.0.1',
    port: spec.port,
    user: 'tsdbadmin',
    password,
    database: 'tsdb',
    ssl,
    connectionTimeoutMillis: 5000,
  });
  client.on('error', () => {});
  await client.connect();
  return client;
}

/** Runs one query over a fresh connection. */
export async function query<T = any>(
  spec: ServiceSpec,
  password: string,
  sql: string,
  params: unknown[] = [],
): Promise<T[]> {
  const c = await connect(spec, password);
  try {
    return (await c.query(sql, params)).rows as T[];
  } finally {
    await c.end();
  }
}

/**
 * A tsdbadmin session that runs programs on the server, as any tenant can:
 * CREATEROLE lets tsdbadmin grant itself pg_execute_server_program
 * (docs/security.md). Ended by the caller.
 */
export async function tenantSession(spec: ServiceSpec, password: string): Promise<pg.Client> {
  const c = await connect(spec, password);
  await c.query('GRANT pg_execute_server_program TO tsdbadmin');
  await c.query('CREATE TEMP TABLE program_out (line text)');
  return c;
}

/**
 * The output lines of `program`, run by the server (as the service's OS
 * user) through COPY … FROM PROGRAM on a tenantSession.
 */
export async function fromProgram(c: pg.Client, program: string): Promise<string[]> {
  await c.query('TRUNCATE program_out');
  // A delimiter no output has: every line is one value, tabs and all.
  await c.query(
    `COPY program_out FROM PROGRAM ${c.escapeLiteral(program)} WITH (DELIMITER E'\\x01')`,
  );
  const { rows } = await c.query<{ line: string }>('SELECT line FROM program_out');
  return rows.map((r) => r.line);
}

/**
 * Live processes of a cluster: a postmaster whose command line names the
 * data directory, or any process working in it (its children).
 */
export function processesOf(pgdata: string): number[] {
  const pids: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const state = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0];
      if (state === 'Z' || state === 'X') continue;
      const cmdline = readFileSync(`/proc/${name}/cmdline`, 'utf8');
      let cwd = '';
      try {
        cwd = readlinkSync(`/proc/${name}/cwd`);
      } catch {
        // exited
      }
      if (cmdline.includes(pgdata) || cwd.startsWith(pgdata)) pids.push(Number(name));
    } catch {
      // exited meanwhile
    }
  }
  return pids;
}

/** The postmaster pid from postmaster.pid. */
export function postmasterPid(pgdata: string): number {
  return Number(readFileSync(join(pgdata, 'postmaster.pid'), 'utf8').split('\n')[0]);
}

/** The system identifier of a data directory, as PostgreSQL's own pg_controldata reads it (CRC checked). */
export function controlDataId(pgdata: string): string {
  const out = execFileSync('/usr/lib/postgresql/15/bin/pg_controldata', [pgdata], {
    encoding: 'utf8',
    env: { LC_ALL: 'C', PATH: process.env.PATH ?? '' },
  });
  const m = /^Database system identifier:\s+(\d+)$/m.exec(out);
  if (!m) throw new Error(`pg_controldata ${pgdata}: ${out}`);
  return m[1] as string;
}

/** The system identifier a pgBackRest info file (backup.info, archive.info) gives its stanza. */
export function stanzaSystemId(infoFile: string): string | undefined {
  return /^\[db\][^[]*^db-system-id=(\d+)$/m.exec(readFileSync(infoFile, 'utf8'))?.[1];
}

/**
 * A data directory that, after the test, has every process still running in
 * it killed and is then removed, whatever state the test left it in: a test
 * that fails half-way must not leave clusters holding ports for the next one.
 */
export function dataDirFor(t: TestContext): string {
  const dir = makeDataDir();
  t.after(() => cleanUpDataDir(dir));
  return dir;
}

export { serviceUsersOf } from '../harness/clean-up.js';

/**
 * Removes a test's data directory whatever state the test left it in
 * (test/harness/clean-up.ts, shared with the end-to-end tests and the
 * benchmarks): kills every process still running in it and every process of
 * the OS users the driver made for its services, removes their cgroups and
 * networks, deletes those users, then the directory. A test that fails
 * half-way must not leave clusters holding ports, or users, for the next one.
 */
export function cleanUpDataDir(dir: string): Promise<void> {
  return removeInstallationLeftovers(dir);
}

/**
 * Uids for the service users of this test process's drivers. Every Basin
 * installation keeps its own high-water mark, so two installations on one
 * host (here: test files running side by side, each with drivers of their
 * own) must not share a range: one would hand out a uid the other just
 * deleted, and sweep or count files that are no longer its own. A range of
 * 200 per process id (pids are unique among live processes), above the
 * default range and the end-to-end tests' (test/harness/installation.ts), and
 * one counter for every driver of the process.
 */
const TEST_UIDS = {
  min: 10_000_000 + process.pid * 200,
  max: 10_000_000 + process.pid * 200 + 199,
};
let nextTestUid = TEST_UIDS.min;
export function testUids(): { serviceUidRange: UidRange; allocateUid: () => Promise<number> } {
  return { serviceUidRange: TEST_UIDS, allocateUid: async () => nextTestUid++ };
}

/**
 * The files under `dirs` (symbolic links not followed, one file system
 * each) that belong to `uid`, as root sees them. Other tests run at the same
 * time and remove their own files: entries that vanish mid-walk are not an
 * error (find's -ignore_readdir_race misses a directory removed before find
 * opens it), any other complaint of find's is.
 */
export function filesOwnedBy(uid: number, dirs: string[]): string[] {
  const r = spawnSync(
    'find',
    ['-P', ...dirs, '-ignore_readdir_race', '-xdev', '-uid', String(uid), '-print'],
    { encoding: 'utf8' },
  );
  const complaints = r.stderr
    .split('\n')
    .filter((l) => l !== '' && !/: No such file or directory$/.test(l));
  if (r.error || (r.status !== 0 && complaints.length > 0)) {
    throw new Error(`find failed: ${r.error?.message ?? complaints.join('; ')}`);
  }
  return r.stdout.split('\n').filter(Boolean);
}
