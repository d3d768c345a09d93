// Who the control plane signs backup certificates for (host-registry.ts):
// the repository host its servers' certificate, a database host a service's
// client certificate only for a service placed on it; each under the
// repositories CA, with the name and the one use its end needs.

import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type TestContext, test } from 'node:test';
import { AppError } from '../../src/domain/errors.js';
import type { Host, HostRole } from '../../src/domain/hosts.js';
import type { Service } from '../../src/domain/types.js';
import { makeKeyAndRequest } from '../../src/lib/x509.js';
import { openSqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { Store } from '../../src/store/store.js';
import {
  issueRepositoryBackupClient,
  issueRepositoryClient,
  issueRepositoryServer,
} from '../../src/hosts/host-registry.js';
import { installationCa, servicesCa } from '../../src/hosts/installation-ca.js';

const SERVER_AUTH = '1.3.6.1.5.5.7.3.1';
const CLIENT_AUTH = '1.3.6.1.5.5.7.3.2';

function host(id: string, role: HostRole, address: string): Host {
  return {
    id,
    role,
    name: `n-${id}`,
    address,
    agentPort: 9444,
    zone: 'a',
    capacity: { cpus: 2, memoryBytes: 2 ** 33, diskBytes: 2 ** 36 },
    usage: null,
    certSha256: `${id}`.padEnd(64, '0'),
    joinedAt: new Date(0).toISOString(),
    heartbeatAt: 0,
  };
}

async function installation(t: TestContext): Promise<Store> {
  const dir = mkdtempSync(join(tmpdir(), 'basin-registry-'));
  const store = openSqliteStore(join(dir, 'basin.db'));
  t.after(() => {
    store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  await store.transaction(async (tx) => {
    await tx.hosts.insert(host('h1', 'database', '10.0.0.11'));
    await tx.hosts.insert(host('h2', 'database', '10.0.0.12'));
    await tx.hosts.insert(host('r1', 'repository', '10.0.0.20'));
  });
  await store.transaction((tx) =>
    tx.placements.put({ resourceId: 'svc1', hostId: 'h1', cpuMillis: 0, memoryMb: 256 }),
  );
  return store;
}

const sha = (id: string) => id.padEnd(64, '0');
const forbidden = (err: unknown) => err instanceof AppError && err.code === 'FORBIDDEN';

test("a service's client certificate goes to the database host it is placed on, and no other", async (t) => {
  const store = await installation(t);
  const { csr } = await makeKeyAndRequest('anything the host asks for');
  const issued = await issueRepositoryClient(store, 'h1', sha('h1'), 'svc1', csr);
  const cert = new X509Certificate(issued.certificate);
  const ca = new X509Certificate(issued.ca);
  // The name its repository server authorizes for its stanza, whatever the request said; a client only.
  assert.equal(cert.subject, 'CN=basin-service-svc1');
  assert.equal(cert.subjectAltName, undefined);
  assert.deepEqual(cert.keyUsage, [CLIENT_AUTH]);
  assert.ok(cert.verify(ca.publicKey));
  // Under neither the hosts' CA nor the services' root.
  assert.ok(!cert.verify(new X509Certificate((await installationCa(store)).cert).publicKey));
  assert.ok(!cert.verify(new X509Certificate((await servicesCa(store)).cert).publicKey));

  // Another database host, the repository host, an unplaced service, a certificate not the host's: refused.
  await assert.rejects(issueRepositoryClient(store, 'h2', sha('h2'), 'svc1', csr), forbidden);
  await assert.rejects(issueRepositoryClient(store, 'r1', sha('r1'), 'svc1', csr), forbidden);
  await assert.rejects(issueRepositoryClient(store, 'h1', sha('h1'), 'svc2', csr), forbidden);
  await assert.rejects(issueRepositoryClient(store, 'h1', sha('h2'), 'svc1', csr), forbidden);
  // A service moved to another host: its old host is refused from then on.
  await store.transaction((tx) =>
    tx.placements.put({ resourceId: 'svc1', hostId: 'h2', cpuMillis: 0, memoryMb: 256 }),
  );
  await assert.rejects(issueRepositoryClient(store, 'h1', sha('h1'), 'svc1', csr), forbidden);
  assert.ok(await issueRepositoryClient(store, 'h2', sha('h2'), 'svc1', csr));
  await assert.rejects(
    issueRepositoryClient(store, 'h2', sha('h2'), 'svc1', 'not a request'),
    (err: unknown) => err instanceof AppError && err.code === 'INVALID_REQUEST',
  );
});

test("an HA service's client certificate goes to every host carrying one of its nodes, under the service's name, and to no other", async (t) => {
  const store = await installation(t);
  const { csr } = await makeKeyAndRequest('a node');
  // svc1's node 0 on h1 (its own row), node 1 on h2; svc2 on h2 alone.
  await store.transaction(async (tx) => {
    await tx.placements.put({
      resourceId: 'svc1:node1',
      hostId: 'h2',
      cpuMillis: 0,
      memoryMb: 256,
    });
    await tx.placements.put({ resourceId: 'svc2', hostId: 'h2', cpuMillis: 0, memoryMb: 256 });
  });
  for (const h of ['h1', 'h2']) {
    const cert = new X509Certificate(
      (await issueRepositoryClient(store, h, sha(h), 'svc1', csr)).certificate,
    );
    // The stanza's one client name: each node of the service, no node's own.
    assert.equal(cert.subject, 'CN=basin-service-svc1');
  }
  // h1 carries no node of svc2; the repository host none of svc1's.
  await assert.rejects(issueRepositoryClient(store, 'h1', sha('h1'), 'svc2', csr), forbidden);
  await assert.rejects(issueRepositoryClient(store, 'r1', sha('r1'), 'svc1', csr), forbidden);
});

test("the repository host's server certificate: its address, for servers, to it alone", async (t) => {
  const store = await installation(t);
  const { csr } = await makeKeyAndRequest('repository server');
  const issued = await issueRepositoryServer(store, 'r1', sha('r1'), csr);
  const cert = new X509Certificate(issued.certificate);
  assert.equal(cert.subject, 'CN=10.0.0.20');
  assert.equal(cert.subjectAltName, undefined);
  assert.deepEqual(cert.keyUsage, [SERVER_AUTH]);
  assert.ok(cert.verify(new X509Certificate(issued.ca).publicKey));
  // The same CA signs the services' client certificates: one root for both ends of backups.
  const client = await issueRepositoryClient(store, 'h1', sha('h1'), 'svc1', csr);
  assert.equal(client.ca, issued.ca);
  await assert.rejects(issueRepositoryServer(store, 'h1', sha('h1'), csr), forbidden);
});

test("a backup's two other ends: the database host's source for its own services, the repository host's client", async (t) => {
  const store = await installation(t);
  const { csr } = await makeKeyAndRequest('anything');
  // The source server a backup reads svc1 through: h1's address, servers only, for h1 alone.
  const source = await issueRepositoryClient(store, 'h1', sha('h1'), 'svc1', csr, 'source');
  const cert = new X509Certificate(source.certificate);
  assert.equal(cert.subject, 'CN=10.0.0.11');
  assert.equal(cert.subjectAltName, undefined);
  assert.deepEqual(cert.keyUsage, [SERVER_AUTH]);
  assert.ok(cert.verify(new X509Certificate(source.ca).publicKey));
  await assert.rejects(
    issueRepositoryClient(store, 'h2', sha('h2'), 'svc1', csr, 'source'),
    forbidden,
  );
  // The repository host's client at that server: basin-repository-<id>, clients only, repository hosts only.
  const client = await issueRepositoryBackupClient(store, 'r1', sha('r1'), 'svc1', csr);
  const c2 = new X509Certificate(client.certificate);
  assert.equal(c2.subject, 'CN=basin-repository-svc1');
  assert.deepEqual(c2.keyUsage, [CLIENT_AUTH]);
  assert.equal(client.ca, source.ca);
  await assert.rejects(issueRepositoryBackupClient(store, 'h1', sha('h1'), 'svc1', csr), forbidden);
  await assert.rejects(issueRepositoryBackupClient(store, 'r1', sha('h1'), 'svc1', csr), forbidden);
});

test("a fork's host is given a certificate for its parent's stanza only while the fork is made", async (t) => {
  const store = await installation(t);
  const service = (id: string, status: string, parent: string | null) =>
    ({
      id,
      projectId: 'p1',
      name: id,
      status,
      forkedFrom:
        parent === null
          ? null
          : { serviceId: parent, projectId: 'p1', strategy: 'NOW', targetTime: null },
      createdAt: new Date(0).toISOString(),
      version: 1,
    }) as unknown as Service;
  await store.transaction(async (tx) => {
    await tx.projects.insert({ id: 'p1', name: 'one', createdAt: new Date(0).toISOString() });
    await tx.services.insert(service('svc1', 'READY', null));
    await tx.services.insert(service('fork1', 'CONFIGURING', 'svc1'));
    await tx.placements.put({ resourceId: 'fork1', hostId: 'h2', cpuMillis: 0, memoryMb: 256 });
  });
  const { csr } = await makeKeyAndRequest('anything');
  // The parent's client name, clients only, under the repositories CA, for a day.
  const issued = await issueRepositoryClient(store, 'h2', sha('h2'), 'fork1', csr, 'fork');
  const cert = new X509Certificate(issued.certificate);
  assert.equal(cert.subject, 'CN=basin-service-svc1');
  assert.deepEqual(cert.keyUsage, [CLIENT_AUTH]);
  assert.ok(cert.verify(new X509Certificate(issued.ca).publicKey));
  const days = (Date.parse(cert.validTo) - Date.parse(cert.validFrom)) / 86_400_000;
  assert.ok(days <= 1.01, `valid for ${days} days`);
  // Not for another host (the parent's included), not for a service that is no fork.
  await assert.rejects(
    issueRepositoryClient(store, 'h1', sha('h1'), 'fork1', csr, 'fork'),
    forbidden,
  );
  await assert.rejects(
    issueRepositoryClient(store, 'h1', sha('h1'), 'svc1', csr, 'fork'),
    forbidden,
  );
  // Not once the fork is made, nor when it failed.
  for (const status of ['READY', 'UNSTABLE']) {
    await store.transaction(async (tx) => {
      const f = (await tx.services.get('fork1')) as Service;
      await tx.services.update({ ...f, status } as Service);
    });
    await assert.rejects(
      issueRepositoryClient(store, 'h2', sha('h2'), 'fork1', csr, 'fork'),
      forbidden,
    );
  }
});
