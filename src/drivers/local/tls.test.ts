// Server certificates: issued by the installation's CA for the public host,
// localhost and the loopback addresses, and recognised as current afterwards
// (so they are issued once, not at every apply: a pair replaced while
// PostgreSQL starts would not match, "key values mismatch").

import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { Layout } from './layout.js';
import { certHosts, ensureCa, issueServerCert, serverCertIsCurrent } from './tls.js';

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
