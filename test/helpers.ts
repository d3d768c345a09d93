// Test helpers: every test builds its own Basin on a fresh temporary data
// directory and closes it afterwards (t.after), as Fastify's own tests do.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { type Basin, type BasinOptions, createBasin } from '../src/basin.js';
import { type Config, parseConfig } from '../src/config.js';

export const API_KEY = 'test-bootstrap-key-0123456789';

export interface TestBasin {
  basin: Basin;
  config: Config;
  projectId: string;
  /** Authorization header of the bootstrap (project) credential. */
  auth: { authorization: string };
  /** app.inject with the bootstrap credential and JSON. */
  call(
    method: string,
    url: string,
    body?: unknown,
  ): Promise<{ status: number; body: any; headers: Record<string, unknown> }>;
}

export function tempDir(t: TestContext, prefix = 'basin-test-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

export function testConfig(dataDir: string, env: Record<string, string> = {}): Config {
  return parseConfig([], {
    BASIN_DATA_DIR: dataDir,
    BASIN_DRIVER: 'sim',
    BASIN_SIM_DELAY_MS: '0',
    BASIN_BOOTSTRAP_API_KEY: API_KEY,
    BASIN_RECONCILE_INTERVAL_MS: '60000',
    ...env,
  });
}

/** A Basin on a new data directory (or `dataDir`, to restart on an old one). */
export async function startBasin(
  t: TestContext,
  opts: { env?: Record<string, string>; dataDir?: string; options?: BasinOptions } = {},
): Promise<TestBasin> {
  const config = testConfig(opts.dataDir ?? tempDir(t), opts.env);
  const basin = await createBasin(config, opts.options);
  let closed = false;
  t.after(async () => {
    if (!closed) await basin.close();
    closed = true;
  });
  const auth = { authorization: `Bearer ${API_KEY}` };
  const projects = await basin.store.projects.list();
  const projectId = (projects[0] as { id: string }).id;
  return {
    basin,
    config,
    projectId,
    auth,
    async call(method, url, body) {
      const res = await basin.app.inject({
        method: method as 'GET',
        url,
        headers: { ...auth, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
      });
      const text = res.body;
      return {
        status: res.statusCode,
        body: text ? JSON.parse(text) : undefined,
        headers: res.headers,
      };
    },
  };
}

/** Polls `fn` until it returns a truthy value (engine work is asynchronous). */
export async function eventually<T>(
  fn: () => Promise<T | undefined | false>,
  what: string,
  timeoutMs = 10_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/**
 * Resolves in the next turn of the event loop. A request that another
 * process's commit came before (the CLI's) is read in a later turn than that
 * commit's, and the store checks for commits once per turn
 * (src/store/sqlite/read-cache.ts); `app.inject` has no turns of its own, so
 * tests that commit through another handle and then inject wait for one.
 */
export function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
