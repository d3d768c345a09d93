// `basin` run as its own process, as an operator runs it, next to a Basin
// that listens on a real port: what it prints is what a client then uses.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { OPTIONS, parseConfig, parseStoreConfig } from '../../src/config.js';
import { startBasin, tempDir } from '../helpers.js';
import { ROOT } from '../harness/root.js';

const root = ROOT;
const tsx = import.meta.resolve('tsx');

/** Runs the CLI from source in `cwd`, with the environment of this process minus BASIN_*. */
async function basin(cwd: string, argv: string[], env: Record<string, string> = {}) {
  const clean = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !k.startsWith('BASIN_')),
  );
  try {
    const r = await promisify(execFile)(
      process.execPath,
      ['--import', tsx, join(root, 'src/cli/basin.ts'), ...argv],
      { cwd, env: { ...clean, ...env } },
    );
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

test('keys printed by `basin credential create` authenticate against a running Basin over HTTP', async (t) => {
  const dataDir = tempDir(t);
  const b = await startBasin(t, { dataDir });
  await b.basin.app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = b.basin.app.server.address() as { port: number };
  const projects = async (authorization: string) => {
    const res = await fetch(`http://127.0.0.1:${port}/v1/projects`, { headers: { authorization } });
    return { status: res.status, body: (await res.json()) as any };
  };

  const env = { BASIN_DATA_DIR: dataDir };
  const made = await basin(root, ['project', 'create', 'web'], env);
  assert.equal(made.code, 0, made.stderr);
  const projectId = made.stdout.trim();
  const issued = await basin(root, ['credential', 'create', '--project', projectId], env);
  assert.equal(issued.code, 0, issued.stderr);
  const field = (label: string) =>
    (new RegExp(`^\\s*${label}:\\s+(\\S+)$`, 'm').exec(issued.stdout) ?? [])[1] as string;
  const bearerKey = field('Bearer key');
  const accessKey = field('Access key');
  const secretKey = field('Secret key');

  const basic = `Basic ${Buffer.from(`${accessKey}:${secretKey}`).toString('base64')}`;
  for (const authorization of [`Bearer ${bearerKey}`, basic]) {
    const res = await projects(authorization);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual(
      res.body.map((p: { id: string; name: string }) => [p.id, p.name]),
      [[projectId, 'web']],
    );
  }
  assert.equal((await projects(`Bearer ${bearerKey}x`)).status, 401);

  // Printed once, on stdout only.
  for (const secret of [bearerKey, secretKey]) {
    assert.equal(issued.stdout.split(secret).length, 2, 'each secret appears exactly once');
    assert.ok(!issued.stderr.includes(secret), 'no secret on stderr');
  }
});

test('without --data-dir or BASIN_DATA_DIR the CLI uses the server default, under the working directory', async (t) => {
  const cwd = tempDir(t);
  const r = await basin(cwd, ['project', 'create', 'web']);
  assert.equal(r.code, 0, r.stderr);
  const dataDir = join(cwd, OPTIONS.dataDir.default);
  assert.ok(existsSync(join(dataDir, 'basin.db')));
  assert.match(r.stderr, /created the data directory/);

  // The server's configuration, read from the same place, finds that store.
  const b = await startBasin(t, { dataDir });
  assert.equal(b.projectId, r.stdout.trim());
  assert.equal(b.basin.bootstrapped, undefined);
});

test('the CLI reads the data directory as the server does: flag, then environment, then default', () => {
  const env = { BASIN_DATA_DIR: '/srv/from-env' };
  for (const [argv, e] of [
    [[], {}],
    [[], env],
    [['--data-dir', '/srv/from-flag'], env],
    [['--data-dir=/srv/inline'], {}],
  ] as const) {
    assert.equal(parseStoreConfig(argv, e).dataDir, parseConfig(argv, e).dataDir);
  }
  assert.equal(parseStoreConfig(['--data-dir', '/srv/from-flag'], env).dataDir, '/srv/from-flag');
  // Other options are the server's business: a bad one does not stop the CLI.
  assert.equal(parseStoreConfig([], { BASIN_PORT: 'nope' }).dataDir, join(process.cwd(), '.basin'));
});

test('the package bin is the built src/cli/basin.ts, an executable script', () => {
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
  assert.equal(pkg.bin.basin, 'dist/cli/basin.js');
  const build = JSON.parse(readFileSync(join(root, 'tsconfig.build.json'), 'utf8'));
  assert.deepEqual([build.compilerOptions.rootDir, build.compilerOptions.outDir], ['src', 'dist']);
  assert.match(readFileSync(join(root, 'src/cli/basin.ts'), 'utf8'), /^#!\/usr\/bin\/env node\n/);
});
