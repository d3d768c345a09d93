// Basin's files are Basin's (issue 7, hole 4). Run as `npm start` runs it
// (dist/main.js in a process of its own, umask and all), on the local driver:
// - the bootstrap credential goes to the terminal (stderr) and nowhere else:
//   not to the log on stdout, not into any file of the data directory
//   (basin.db keeps hashes only);
// - a data directory an older Basin left with loose modes, and a server.log
//   an operator redirected into it, are tightened at the next start, so a
//   tenant's OS user reads none of it, and the services still run.

import assert from 'node:assert/strict';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  existsSync,
  lstatSync,
  readdirSync,
  readFileSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import pg from 'pg';
import { Layout } from '../../src/drivers/local/layout.js';
import { readPasswd } from '../../src/drivers/local/host/os-user.js';
import { serviceUserName } from '../../src/drivers/local/host/service-users.js';
import { eventually } from '../helpers.js';
import { cleanUpDataDir, makeDataDir } from '../local/helpers.js';
import { serviceNetwork } from './basin-process.js';
import { claimPortBlock, type PortBlock } from '../harness/port-block.js';

interface Server {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  url: string;
  stop(): Promise<void>;
}

/** dist/main.js as `npm start` runs it, with no bootstrap key given. */
async function startServer(dataDir: string, ports: PortBlock): Promise<Server> {
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    BASIN_DATA_DIR: dataDir,
    BASIN_PORT: String(ports.apiPort),
    BASIN_DRIVER: 'local',
    BASIN_PORT_RANGE: ports.portRange,
    // Its services' addresses, apart from other installations' (test/harness/installation.ts).
    BASIN_SERVICE_NETWORK: serviceNetwork(ports.claimed),
    BASIN_RECONCILE_INTERVAL_MS: '200',
    BASIN_LOG_LEVEL: 'info',
  };
  const child = spawn(process.execPath, ['dist/main.js'], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout?.on('data', (d) => (out += d));
  child.stderr?.on('data', (d) => (err += d));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = `http://127.0.0.1:${ports.apiPort}`;
  await eventually(
    async () => {
      if (child.exitCode !== null) throw new Error(`Basin exited:\n${out}\n${err}`);
      return fetch(`${url}/v1/openapi.json`).then(
        (r) => r.ok,
        () => false,
      );
    },
    'Basin listening',
    60_000,
  );
  return {
    child,
    stdout: () => out,
    stderr: () => err,
    url,
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

/** Every regular file under `dir`, without following links. */
function files(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    const st = lstatSync(path);
    if (st.isDirectory()) out.push(...files(path));
    else if (st.isFile()) out.push(path);
  }
  return out;
}

const mode = (path: string) => statSync(path).mode & 0o7777;

test(
  "the bootstrap credential reaches only the terminal, and Basin's files are Basin's",
  { timeout: 300_000 },
  async (t) => {
    const dataDir = makeDataDir();
    const ports = await claimPortBlock();
    t.after(() => ports.release());
    let server = await startServer(dataDir, ports);
    t.after(() => server.stop());
    t.after(() => cleanUpDataDir(dataDir));

    const field = (name: string) =>
      new RegExp(`^\\s*${name}:\\s+(\\S+)`, 'm').exec(server.stderr())?.[1] ?? '';
    await eventually(async () => field('Secret key') !== '', 'the credential on stderr');
    const bearer = field('Bearer key');
    const accessKey = field('Access key');
    const secret = field('Secret key');
    const project = field('Project');
    assert.match(bearer, /^bsn_/);
    const call = async (method: string, path: string, body?: unknown, basic = false) => {
      const authorization = basic
        ? `Basic ${Buffer.from(`${accessKey}:${secret}`).toString('base64')}`
        : `Bearer ${bearer}`;
      const res = await fetch(`${server.url}/v1${path}`, {
        method,
        headers: {
          authorization,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      return { status: res.status, body: (await res.json()) as any };
    };
    const created = await call('POST', `/projects/${project}/services`, {
      name: 'files',
      addons: [],
      cpu_millis: 'shared',
      memory_gbs: 'shared',
    });
    assert.equal(created.status, 202, JSON.stringify(created.body));
    const id = created.body.service_id as string;
    const ready = () =>
      eventually(
        async () =>
          (await call('GET', `/projects/${project}/services/${id}`, undefined, true)).body
            ?.status === 'READY',
        'READY',
        90_000,
      );
    await ready();
    await server.stop();

    await t.test('the credential went to stderr once, and nowhere else', () => {
      for (const s of [bearer, secret]) {
        assert.equal(server.stderr().split(s).length - 1, 1, 'shown once');
        assert.ok(server.stdout().length > 0, 'Basin logged');
        assert.equal(server.stdout().includes(s), false, 'not in the log');
      }
      const all = files(dataDir);
      assert.ok(all.length > 100, `${all.length} files`);
      const hashes = [bearer, secret].map((s) => createHash('sha256').update(s).digest('hex'));
      let hashed = 0;
      for (const f of all) {
        const bytes = readFileSync(f);
        for (const s of [bearer, secret]) assert.equal(bytes.includes(s), false, `${s} in ${f}`);
        if (f.startsWith(join(dataDir, 'basin.db'))) {
          hashed += hashes.filter((h) => bytes.includes(h)).length;
        }
      }
      assert.ok(hashed >= 2, 'basin.db keeps the hashes');
    });

    // An older Basin's modes, and a log an operator redirected beside them.
    const layout = new Layout(dataDir);
    const node = { id, node: 0 };
    const serverLog = join(dataDir, 'server.log');
    writeFileSync(serverLog, server.stdout());
    // Its repository: its repository user's, where servers are on (the default as root), else its own.
    const repoDir = existsSync(layout.backupDirs(id).repo)
      ? layout.backupDirs(id).repo
      : layout.repository(id).repo;
    const loose: [string, number][] = [
      [dataDir, 0o755],
      [serverLog, 0o644],
      [layout.root, 0o755],
      [layout.installationFile, 0o644],
      [layout.caDir, 0o755],
      [layout.caKey, 0o644],
      [layout.templateDir, 0o755],
      [layout.instancesDir, 0o755],
      [layout.instanceDir(id), 0o755],
      [layout.nodeDir(node), 0o755],
      [layout.stateFile(node), 0o644],
      [layout.startupLog(node), 0o644],
      [repoDir, 0o755],
      [layout.backupConf(id), 0o644],
      ...files(dataDir)
        .filter((f) => /\/basin\.db(-wal|-shm)?$/.test(f))
        .map((f): [string, number] => [f, 0o644]),
    ];
    for (const [path, m] of loose) chmodSync(path, m);
    const tenant = readPasswd().find((p) => p.name === serviceUserName(id));
    assert.ok(tenant);
    const readable = (path: string) =>
      spawnSync('test', ['-r', path], { uid: tenant.uid, gid: tenant.gid }).status === 0;
    assert.ok(readable(serverLog), 'the tenant could read server.log');

    server = await startServer(dataDir, ports);

    await t.test('a new start sets every mode back to the documented one', () => {
      const want: [string, number][] = [
        [dataDir, 0o701],
        [serverLog, 0o600],
        [layout.root, 0o711],
        [layout.installationFile, 0o600],
        [layout.caDir, 0o700],
        [layout.caKey, 0o600],
        [layout.templateDir, 0o711],
        [layout.instancesDir, 0o711],
        [layout.instanceDir(id), 0o711],
        [layout.nodeDir(node), 0o711],
        [layout.stateFile(node), 0o600],
        [layout.startupLog(node), 0o600],
        [repoDir, 0o700],
        [layout.backupConf(id), 0o640],
      ];
      for (const [path, m] of want) {
        assert.equal(mode(path).toString(8), m.toString(8), path);
      }
      for (const f of files(dataDir).filter((f) => /\/basin\.db(-wal|-shm)?$/.test(f))) {
        assert.equal(mode(f), 0o600, f);
      }
      assert.equal(readable(serverLog), false, 'the tenant cannot read server.log');
      assert.equal(readable(join(dataDir, 'basin.db')), false);
    });

    await t.test('and the service still runs', async () => {
      await ready();
      const c = new pg.Client({
        host: '127.0.0.1',
        port: created.body.endpoint.port,
        user: 'tsdbadmin',
        password: created.body.initial_password,
        database: 'tsdb',
        ssl: { rejectUnauthorized: false },
      });
      await c.connect();
      try {
        assert.deepEqual((await c.query('SELECT 1 AS one')).rows, [{ one: 1 }]);
      } finally {
        await c.end();
      }
    });
  },
);
