// The repository host (docs/decisions.md, "Several hosts"), on the
// namespace topology (topology.sh): a `basin host run --role repository`
// joins like a database host, is listed with its role, and gets its
// pgBackRest servers' certificate from the installation's repositories CA
// (not the hosts' CA, not the services' root); a database host asking for
// one is refused, and a host cannot change its role without joining again.

import assert from 'node:assert/strict';
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { httpsJson } from '../../src/lib/https-json.js';
import { makeKeyAndRequest } from '../../src/lib/x509.js';
import { installation, type Installation } from '../e2e/basin-process.js';
import { freePort } from '../harness/postmaster.js';
import { ROOT } from '../harness/installation.js';
import { startStorePostgres } from '../store-postgres.js';

const TOPOLOGY = join(ROOT, 'test/cluster/topology.sh');
const CLI = join(ROOT, 'dist/cli/basin.js');
const PREFIX = 'rph';
/** The topology's subnet, 10.231.3.0/24: its own, as the tests run in parallel. */
const NET = 3;
const address = (i: number) => `10.231.${NET}.${10 + i}`;
const CONTROL_PLANE_ADDRESS = `10.231.${NET}.1`;

interface Agent {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

test(
  'a repository host joins with its role, and only it gets a certificate of the repositories CA',
  { timeout: 300_000 },
  async (t) => {
    execFileSync('bash', [TOPOLOGY, 'up', PREFIX, '2', String(NET)]);
    t.after(() => execFileSync('bash', [TOPOLOGY, 'down', PREFIX]));

    const pgc = await startStorePostgres(t);
    const url = await pgc.createDatabase('basin');
    const inst = await installation(t, { driver: 'sim', args: ['--store-url', url] });
    const hostPort = await freePort();
    const b = await inst.start({ args: ['--host-listen', `${CONTROL_PLANE_ADDRESS}:${hostPort}`] });
    const controlPlane = `https://${CONTROL_PLANE_ADDRESS}:${hostPort}`;
    const cli = async (...args: string[]) => {
      const r = await inst.cli('--store-url', url, ...args);
      assert.equal(r.code, 0, r.stderr);
      return r.stdout;
    };
    const token = async () =>
      JSON.parse(await cli('host', 'token', '--json')) as { token: string; ca_sha256: string };
    const hosts = async () =>
      JSON.parse(await cli('host', 'list', '--json')) as {
        id: string;
        name: string;
        role: string;
        state: string;
      }[];

    const agents: Agent[] = [];
    t.after(() => agents.forEach((a) => a.child.kill('SIGKILL')));
    const hostDirs: Installation[] = [await installation(t), await installation(t)];
    const dataDir = (i: number) => (hostDirs[i - 1] as Installation).dataDir;
    const runAgent = (i: number, extra: string[]): Agent => {
      const h = hostDirs[i - 1] as Installation;
      const child = spawn(
        'ip',
        ['netns', 'exec', `${PREFIX}-h${i}`, process.execPath, CLI, '--data-dir', h.dataDir,
        'host', 'run', '--address', address(i), '--name', `h${i}`, '--heartbeat-ms', '300',
        ...extra, '--', '--service-uid-range', `${h.serviceUids.min}-${h.serviceUids.max}`,
        '--service-network', h.serviceNetwork], // prettier-ignore
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

    // h1 joins as the repository host, h2 as a database host (the default).
    const repository = runAgent(1, ['--role', 'repository', ...joinArgs(await token())]);
    runAgent(2, joinArgs(await token()));
    await until(async () => (await hosts()).filter((h) => h.state === 'ONLINE').length === 2);
    assert.deepEqual(
      (await hosts()).map((h) => [h.name, h.role]),
      [
        ['h1', 'repository'],
        ['h2', 'database'],
      ],
    );
    const table = await cli('host', 'list');
    assert.match(table, /^h1\s+\S+\s+repository\s/m, table);
    // The control plane reaches it as any host; it says what it is.
    const health = JSON.parse(await cli('host', 'check', 'h1', '--json')) as { role: string };
    assert.equal(health.role, 'repository');

    // Its servers' certificate: its address, under the repositories CA, its key root's alone.
    const tls = (i: number, f: string) => readFileSync(join(dataDir(i), f), 'utf8');
    const server = new X509Certificate(tls(1, 'repository/tls/server.crt'));
    const repositoriesCa = new X509Certificate(tls(1, 'repository/tls/ca.crt'));
    assert.match(server.subject, new RegExp(`CN=${address(1).replaceAll('.', '\\.')}`));
    // No SAN (pgBackRest would then look only there, and match no address), for servers only.
    assert.equal(server.subjectAltName, undefined);
    assert.equal(server.keyUsage?.join(), '1.3.6.1.5.5.7.3.1');
    assert.ok(server.verify(repositoriesCa.publicKey));
    assert.equal(statSync(join(dataDir(1), 'repository/tls/server.key')).mode & 0o777, 0o600);
    // Not the hosts' CA (a host or the control plane) nor the services' root (every client's).
    const hostsCa = new X509Certificate(tls(1, 'tls/ca.crt'));
    const servicesRoot = new X509Certificate((await cli('host', 'ca')).trim());
    assert.ok(!server.verify(hostsCa.publicKey));
    assert.ok(!server.verify(servicesRoot.publicKey));
    assert.notEqual(repositoriesCa.fingerprint256, hostsCa.fingerprint256);
    assert.notEqual(repositoriesCa.fingerprint256, servicesRoot.fingerprint256);

    // A database host, with its own certificate, is refused one.
    const { csr } = await makeKeyAndRequest('repository server');
    const asDatabaseHost = await httpsJson(`${controlPlane}/v1/hosts/repository-server`, {
      ca: tls(2, 'tls/ca.crt'),
      cert: tls(2, 'tls/host.crt'),
      key: tls(2, 'tls/host.key'),
      peerCn: 'basin-control-plane',
      body: { csr },
    });
    assert.equal(asDatabaseHost.status, 403, asDatabaseHost.text);
    assert.match((asDatabaseHost.body as { message: string }).message, /h2 is a database host/);
    // Nor may anyone without a host's certificate ask.
    const stranger = await httpsJson(`${controlPlane}/v1/hosts/repository-server`, {
      ca: tls(2, 'tls/ca.crt'),
      body: { csr },
    });
    assert.equal(stranger.status, 401, stranger.text);

    // A host keeps the role it joined with: run as another, it refuses to start.
    repository.child.kill('SIGTERM');
    await repository.exited;
    const switched = runAgent(1, ['--role', 'database']);
    assert.notEqual(await switched.exited, 0);
    assert.match(switched.output(), /joined the installation as a repository host/);
    // Run again without --role, it is the repository host it was.
    runAgent(1, []);
    await until(async () => (await inst.cli('--store-url', url, 'host', 'check', 'h1')).code === 0);

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
