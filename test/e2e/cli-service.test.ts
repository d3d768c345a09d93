// `basin login` and `basin service …` as shipped (node dist/cli/basin.js,
// no terminal, so no status line), against `node dist/main.js`: the README's
// walkthrough on the sim driver, then `basin service psql` on the local
// driver, where psql really connects with sslmode=verify-full.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { promisify } from 'node:util';
import { installation } from './basin-process.js';
import { ROOT } from '../harness/root.js';

const CLI = join(ROOT, 'dist/cli/basin.js');

/** `basin` with a config directory of its own and nothing of the developer's BASIN_* or PG*. */
function cli(t: TestContext, env: Record<string, string> = {}) {
  const home = mkdtempSync(join(tmpdir(), 'basin-cli-home-'));
  t.after(() => rmSync(home, { recursive: true, force: true }));
  const base = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !/^(BASIN_|PG)/.test(k)),
  );
  const run = async (argv: string[], more: Record<string, string> = {}) => {
    try {
      const r = await promisify(execFile)(process.execPath, [CLI, ...argv], {
        cwd: ROOT,
        env: { ...base, HOME: home, XDG_CONFIG_HOME: join(home, 'config'), ...env, ...more },
      });
      return { code: 0, stdout: r.stdout, stderr: r.stderr };
    } catch (err) {
      const e = err as { code: number; stdout: string; stderr: string };
      return { code: e.code, stdout: e.stdout, stderr: e.stderr };
    }
  };
  const ok = async (argv: string[], more?: Record<string, string>) => {
    const r = await run(argv, more);
    assert.equal(r.code, 0, `basin ${argv.join(' ')}:\n${r.stderr}`);
    assert.equal(r.stderr.includes('\u001b'), false, 'no status line without a terminal');
    return r.stdout;
  };
  return {
    home,
    run,
    ok,
    json: async (argv: string[]) => JSON.parse(await ok([...argv, '--output', 'json'])),
  };
}

test(
  'the README walkthrough through `basin service`, against dist/main.js (sim)',
  { timeout: 120_000 },
  async (t) => {
    const inst = await installation(t, { driver: 'sim', env: { BASIN_SIM_DELAY_MS: '0' } });
    const b = await inst.start();
    const basin = cli(t);

    const login = await basin.ok(['login', '--url', b.url, '--key', b.bearerKey]);
    assert.match(login, new RegExp(`project ${b.projectId}\\.`));
    assert.equal(statSync(join(basin.home, 'config', 'basin', 'config.json')).mode & 0o777, 0o600);

    const created = await basin.json([
      'service',
      'create',
      'metrics',
      '--cpu',
      '1000',
      '--memory',
      '4',
      '--wait',
    ]);
    assert.equal(created.status, 'READY');
    assert.equal(typeof created.initial_password, 'string');
    const id: string = created.service_id;
    assert.match(
      await basin.ok(['service', 'list']),
      new RegExp(`\\n${id}\\s+metrics\\s+READY\\s`),
    );
    assert.match(await basin.ok(['service', 'get', id]), /^STATUS\s+READY$/m);
    assert.equal((await basin.json(['service', 'stop', id, '--wait'])).status, 'PAUSED');
    assert.equal((await basin.json(['service', 'start', id, '--wait'])).status, 'READY');
    const resized = await basin.json([
      'service',
      'resize',
      id,
      '--cpu',
      '2000',
      '--memory',
      '8',
      '--wait',
    ]);
    assert.equal(resized.resources[0].spec.memory_gbs, 8);
    assert.equal((await basin.json(['service', 'rename', id, 'metrics-eu'])).name, 'metrics-eu');
    const logs = await basin.ok(['service', 'logs', id, '--severity', 'ERROR', '--limit', '0']);
    for (const line of logs.trimEnd().split('\n')) assert.match(line, /^\S+\s+ERROR\s+/);
    const fork = await basin.json(['service', 'fork', id, '--wait']);
    assert.equal(fork.name, 'metrics-eu-fork');
    assert.equal(fork.status, 'READY');
    for (const gone of [fork.service_id, id]) {
      assert.equal(
        (await basin.ok(['service', 'delete', gone, '--wait'])).trim(),
        `Deleted ${gone}.`,
      );
    }
    assert.deepEqual(await basin.json(['service', 'list']), []);
    const missing = await basin.run(['service', 'get', id]);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /^basin: Service \w+ not found/);
  },
);

test(
  '`basin service psql` connects to a real database with sslmode=verify-full (local driver)',
  { timeout: 180_000 },
  async (t) => {
    const inst = await installation(t);
    const b = await inst.start();
    const basin = cli(t, { BASIN_DATA_DIR: inst.dataDir });
    await basin.ok(['login', '--url', b.url, '--key', b.bearerKey]);
    const svc = await basin.json([
      'service',
      'create',
      'db',
      '--addons',
      'none',
      '--cpu',
      'shared',
      '--memory',
      'shared',
      '--wait',
    ]);
    assert.equal(svc.status, 'READY');
    // The CA is found in the data directory (BASIN_DATA_DIR, as the admin commands find it).
    const out = await basin.ok(
      [
        'service',
        'psql',
        svc.service_id,
        '--',
        '-XAtq',
        '-c',
        "SELECT current_user || ' ' || ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
      ],
      { PGPASSWORD: svc.initial_password, PGCONNECT_TIMEOUT: '10' },
    );
    assert.equal(out.trim(), 'tsdbadmin true');
    // A CA that is not the installation's: verify-full refuses the server.
    const wrong = await basin.run(
      [
        'service',
        'psql',
        svc.service_id,
        '--ca',
        '/etc/ssl/certs/ca-certificates.crt',
        '--',
        '-Xc',
        'SELECT 1',
      ],
      { PGPASSWORD: svc.initial_password },
    );
    assert.notEqual(wrong.code, 0);
    assert.match(wrong.stderr, /certificate verify failed/);
    await basin.ok(['service', 'delete', svc.service_id, '--wait']);
  },
);
