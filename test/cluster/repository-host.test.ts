// The repository host (docs/decisions.md, "Several hosts"), on the
// namespace topology (topology.sh): a `basin host run --role repository`
// joins like a database host, is listed with its role, and gets its
// pgBackRest servers' certificate from the installation's repositories CA
// (not the hosts' CA, not the services' root); a database host asking for
// one is refused, and a host cannot change its role without joining again.

import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { httpsJson } from '../../src/lib/https-json.js';
import { makeKeyAndRequest } from '../../src/lib/x509.js';
import { type Agent, cluster, until } from './cluster.js';

const PREFIX = 'rph';
/** The topology's subnet, 10.231.3.0/24: its own, as the tests run in parallel. */
const NET = 3;

test(
  'a repository host joins with its role, and only it gets a certificate of the repositories CA',
  { timeout: 300_000 },
  async (t) => {
    const c = await cluster(t, { prefix: PREFIX, net: NET, hosts: 2, driver: 'sim' });
    const { b, cli, address, controlPlane, token, joinArgs } = c;
    const hosts = async () =>
      JSON.parse(await cli('host', 'list', '--json')) as {
        id: string;
        name: string;
        role: string;
        state: string;
      }[];
    const dataDir = (i: number) => c.host(i).dataDir;
    const runAgent = (i: number, args: string[]): Agent => c.runAgent(i, { args });

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
    await until(
      async () => (await c.inst.cli('--store-url', c.url, 'host', 'check', 'h1')).code === 0,
    );

    assert.equal((await b.stop()).code, 0);
  },
);
