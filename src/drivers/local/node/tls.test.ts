// Server certificates: issued by the installation's CA for the public host,
// localhost and the loopback addresses, and recognised as current afterwards
// (so they are issued once, not at every apply: a pair replaced while
// PostgreSQL starts would not match, "key values mismatch").

import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { Layout } from '../layout.js';
import {
  certHosts,
  ensureCa,
  issueServerCert,
  serverCertIsCurrent,
  serviceHostname,
} from './tls.js';

test('an issued certificate is current for its hosts, IPv6 loopback included, and only for them', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'basin-tls-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const layout = new Layout(dir);
  mkdirSync(layout.root, { recursive: true });
  await ensureCa(layout);
  const pgdata = join(dir, 'pgdata');
  mkdirSync(pgdata);
  const me = userInfo();
  const hosts = certHosts('db.example.test');
  assert.ok(hosts.includes('::1'));

  assert.equal(await serverCertIsCurrent(layout, pgdata, hosts), false, 'none yet');
  await issueServerCert(layout, pgdata, hosts, { name: me.username, uid: me.uid, gid: me.gid });
  assert.equal(await serverCertIsCurrent(layout, pgdata, hosts), true);
  assert.equal(await serverCertIsCurrent(layout, pgdata, ['::1', '127.0.0.1']), true);
  assert.equal(await serverCertIsCurrent(layout, pgdata, ['0:0:0:0:0:0:0:1']), true);
  assert.equal(await serverCertIsCurrent(layout, pgdata, certHosts('other.example.test')), false);
  assert.equal(await serverCertIsCurrent(layout, pgdata, ['::2']), false);
  const inAYear = Date.now() + 800 * 24 * 3600 * 1000;
  assert.equal(await serverCertIsCurrent(layout, pgdata, hosts, inAYear), false, 'near expiry');
});

test("a service's certificate names the service itself, and an older one is issued anew once", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'basin-tls-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const layout = new Layout(dir);
  mkdirSync(layout.root, { recursive: true });
  await ensureCa(layout);
  const pgdata = join(dir, 'pgdata');
  mkdirSync(pgdata);
  const me = userInfo();
  const user = { name: me.username, uid: me.uid, gid: me.gid };
  const hosts = certHosts('db.example.test', 'abc123');
  assert.deepEqual(hosts, [
    'db.example.test',
    'abc123.db.example.test',
    'localhost',
    '127.0.0.1',
    '::1',
  ]);
  assert.equal(
    serviceHostname('abc123', '10.0.0.5'),
    undefined,
    'an address has no names under it',
  );
  assert.deepEqual(certHosts('10.0.0.5', 'abc123'), ['10.0.0.5', 'localhost', '127.0.0.1', '::1']);
  // A certificate issued before services were named in theirs…
  await issueServerCert(layout, pgdata, certHosts('db.example.test'), user);
  assert.equal(await serverCertIsCurrent(layout, pgdata, hosts), false, 'is issued anew');
  await issueServerCert(layout, pgdata, hosts, user);
  assert.equal(await serverCertIsCurrent(layout, pgdata, hosts), true, 'once');
  assert.equal(
    await serverCertIsCurrent(layout, pgdata, certHosts('db.example.test', 'other1')),
    false,
    "another service's name is not this certificate's",
  );
});
