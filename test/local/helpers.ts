// Helpers for the local driver's tests: real PostgreSQL clusters on this host.

import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { TestContext } from 'node:test';
import pg from 'pg';
import type { Driver, ServiceSpec } from '../../src/drivers/driver.js';
import type { ServiceType, Size } from '../../src/domain/types.js';
import { scramVerifier } from '../../src/lib/secrets.js';

export const SHARED: Size = { shared: true, cpuMillis: 0, memoryGbs: 0 };
export const SMALL: Size = { shared: false, cpuMillis: 500, memoryGbs: 2 };

/** A data directory for one test file; removed by the caller (after deleting its services). */
export function makeDataDir(): string {
  return mkdtempSync(join(tmpdir(), 'basin-local-'));
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
  return {
    serviceId: serviceId(),
    projectId: 'p000000000',
    type,
    vector: type === 'VECTOR',
    size: SHARED,
    environment: 'DEV',
    running: true,
    port: await freePort(),
    passwordVerifier: scramVerifier(password),
    pooler: { enabled: false, port: null },
    allowedCidrs: [],
    ha: { replicaCount: 0, syncReplicaCount: 0 },
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

/**
 * A data directory that, after the test, has every process still running in
 * it killed and is then removed, whatever state the test left it in: a test
 * that fails half-way must not leave clusters holding ports for the next one.
 */
export function dataDirFor(t: TestContext): string {
  const dir = makeDataDir();
  t.after(async () => {
    for (const pid of processesOf(dir)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    await sleep(100);
    removeDir(dir);
  });
  return dir;
}
