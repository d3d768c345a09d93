// Hosts joining an installation, on the namespace topology (topology.sh):
// three `basin host run` agents, each in a network namespace of its own with
// an address that exists only there, join a control plane (`dist/main.js
// --host-listen`, PostgreSQL store) in the root namespace with one-time
// tokens, report, and answer only the control plane. What a stranger, a
// reused token, a wrong CA and a removed host get is refused.

import assert from 'node:assert/strict';
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { httpsJson } from '../../src/lib/https-json.js';
import { installation, type Installation } from '../e2e/basin-process.js';
import { freePort } from '../harness/postmaster.js';
import { ROOT } from '../harness/installation.js';
import { startStorePostgres } from '../store-postgres.js';

const TOPOLOGY = join(ROOT, 'test/cluster/topology.sh');
const CLI = join(ROOT, 'dist/cli/basin.js');
const PREFIX = 'bhj';
const address = (i: number) => `10.231.0.${10 + i}`;

interface Agent {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

test(
  'hosts join with one-time tokens over mutual TLS, report, and answer only the control plane',
  { timeout: 300_000 },
  async (t) => {
    execFileSync('bash', [TOPOLOGY, 'up', PREFIX, '3']);
    t.after(() => execFileSync('bash', [TOPOLOGY, 'down', PREFIX]));
    const dirs = mkdtempSync(join(tmpdir(), 'basin-hosts-'));
    t.after(() => rmSync(dirs, { recursive: true, force: true }));

    const pgc = await startStorePostgres(t);
    const url = await pgc.createDatabase('basin');
    const inst = await installation(t, { driver: 'sim', args: ['--store-url', url] });
    const hostPort = await freePort();
    const b = await inst.start({ args: ['--host-listen', `10.231.0.1:${hostPort}`] });
    const controlPlane = `https://10.231.0.1:${hostPort}`;
    const cli = async (...args: string[]) => {
      const r = await inst.cli('--store-url', url, ...args);
      assert.equal(r.code, 0, r.stderr);
      return r.stdout;
    };
    const token = async () =>
      JSON.parse(await cli('host', 'token', '--json')) as { token: string; ca_sha256: string };
    const hosts = async (lostAfter = 15) =>
      JSON.parse(await cli('host', 'list', '--json', '--lost-after', String(lostAfter))) as {
        id: string;
        name: string;
        address: string;
        zone: string;
        state: string;
        cpus: number;
        heartbeat_at: string;
      }[];

    const agents: Agent[] = [];
    t.after(() => agents.forEach((a) => a.child.kill('SIGKILL')));
    // Each host's data directory is an installation of the harness: uids and
    // service addresses of its own for its local driver, all removed after.
    const hostDirs: Installation[] = [];
    for (let i = 0; i < 3; i++) hostDirs.push(await installation(t));
    const driverFlags = (h: Installation) => [
      '--', '--service-uid-range', `${h.serviceUids.min}-${h.serviceUids.max}`,
      '--service-network', h.serviceNetwork,
    ]; // prettier-ignore
    const runAgent = (i: number, dir: string, extra: string[], port = 9444): Agent => {
      const h = hostDirs[i - 1] as Installation;
      const dataDir = dir === 'host' ? h.dataDir : join(dirs, dir);
      const child = spawn(
        'ip',
        ['netns', 'exec', `${PREFIX}-h${i}`, process.execPath, CLI, '--data-dir', dataDir,
        'host', 'run', '--address', address(i), '--port', String(port), '--name', `h${i}`,
        '--zone', i === 3 ? 'b' : 'a', '--heartbeat-ms', '300', ...extra, ...driverFlags(h)], // prettier-ignore
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      let out = '';
      child.stdout.on('data', (d: Buffer) => (out += d));
      child.stderr.on('data', (d: Buffer) => (out += d));
      const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)));
      const agent = { child, output: () => out, exited };
      agents.push(agent);
      return agent;
    };
    const joinArgs = (tk: { token: string; ca_sha256: string }) => [
    '--control-plane', controlPlane, '--token', tk.token, '--ca-sha256', tk.ca_sha256,
  ]; // prettier-ignore

    // Three hosts join, each with a token of its own.
    const tokens = [await token(), await token(), await token()];
    for (const i of [1, 2, 3]) runAgent(i, 'host', joinArgs(tokens[i - 1] as (typeof tokens)[0]));
    await until(async () => (await hosts()).filter((h) => h.state === 'ONLINE').length === 3);
    // An agent serves once its local driver has started (its template built).
    for (const name of ['h1', 'h2', 'h3']) {
      await until(
        async () => (await inst.cli('--store-url', url, 'host', 'check', name)).code === 0,
        120_000,
      );
    }
    const listed = await hosts();
    assert.deepEqual(
      listed.map((h) => [h.name, h.address, h.zone, h.state]),
      [
        ['h1', address(1), 'a', 'ONLINE'],
        ['h2', address(2), 'a', 'ONLINE'],
        ['h3', address(3), 'b', 'ONLINE'],
      ],
    );
    assert.ok(listed.every((h) => h.cpus >= 1));
    // Its key never leaves the host, and only root reads it.
    assert.equal(
      statSync(join((hostDirs[0] as Installation).dataDir, 'tls', 'host.key')).mode & 0o777,
      0o600,
    );

    // The control plane calls an agent with its certificate (mutual TLS).
    const h2 = listed[1] as (typeof listed)[0];
    const checked = JSON.parse(await cli('host', 'check', 'h2', '--json')) as { host_id: string };
    assert.equal(checked.host_id, h2.id);

    // Nobody else may: not a client without a certificate (the handshake fails),
    // not another host with its own certificate from the same CA.
    await assert.rejects(
      httpsJson(`https://${address(2)}:9444/v1/agent/health`, { timeoutMs: 5000 }),
    );
    const read = (f: string) =>
      readFileSync(join((hostDirs[0] as Installation).dataDir, 'tls', f), 'utf8');
    const asHost1 = await httpsJson(`https://${address(2)}:9444/v1/agent/health`, {
      ca: read('ca.crt'),
      cert: read('host.crt'),
      key: read('host.key'),
      peerCn: `host:${h2.id}`,
    });
    assert.equal(asHost1.status, 403, asHost1.text);
    assert.equal((asHost1.body as { code: string }).code, 'FORBIDDEN');
    // A heartbeat without a host's certificate is refused.
    const stranger = await httpsJson(`${controlPlane}/v1/hosts/heartbeat`, {
      body: {
        capacity: { cpus: 1, memory_bytes: 1, disk_bytes: 1 },
        usage: { memory_free_bytes: 1, disk_free_bytes: 1, load1: 0 },
      },
    });
    assert.equal(stranger.status, 401, stranger.text);

    // A token joins one host; a wrong CA hash is refused before anything is sent.
    const reused = runAgent(3, 'again', joinArgs(tokens[0] as (typeof tokens)[0]), 9445);
    assert.notEqual(await reused.exited, 0);
    assert.match(reused.output(), /used already/);
    const wrongCa = runAgent(
      3,
      'wrong-ca',
      joinArgs({ ...(await token()), ca_sha256: 'ab'.repeat(32) }),
      9446,
    );
    assert.notEqual(await wrongCa.exited, 0);
    assert.match(wrongCa.output(), /does not present the CA/);
    assert.equal((await hosts()).length, 3);

    // A host killed with kill -9 stops reporting and is LOST; run again without
    // a token, it is the same host (its identity is kept) and reports again.
    const first = agents[0] as Agent;
    first.child.kill('SIGKILL');
    execFileSync('bash', ['-c', `kill -9 $(ip netns pids ${PREFIX}-h1) 2>/dev/null || true`]);
    await until(async () => (await hosts(1)).find((h) => h.name === 'h1')?.state === 'LOST');
    const lostAt = (await hosts()).find((h) => h.name === 'h1')?.heartbeat_at as string;
    runAgent(1, 'host', []);
    await until(async () => {
      const h1 = (await hosts(1)).find((h) => h.name === 'h1');
      return h1?.state === 'ONLINE' && h1.heartbeat_at > lostAt;
    });
    assert.equal((await hosts()).find((h) => h.name === 'h1')?.id, listed[0]?.id);

    // A removed host's certificate is refused from then on.
    await cli('host', 'remove', 'h3');
    const third = agents[2] as Agent;
    await until(async () => /refused the heartbeat/.test(third.output()));
    assert.deepEqual(
      (await hosts()).map((h) => h.name),
      ['h1', 'h2'],
    );

    assert.equal((await b.stop()).code, 0);
  },
);

async function until(check: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('timed out');
    await sleep(200);
  }
}
