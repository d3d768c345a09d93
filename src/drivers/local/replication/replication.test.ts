import assert from 'node:assert/strict';
import { test } from 'node:test';
import { HOST_NETWORK, namespaceSources, pgHba } from '../config/conf.js';
import { renderService } from '../endpoints/haproxy.js';
import { standbyConninfo, synchronousStandbyNames } from './replication.js';

test('synchronous_standby_names: ANY k of the standbys, quoted; none without sync or standbys', () => {
  assert.equal(synchronousStandbyNames(1, [1, 2]), 'ANY 1 ("node1", "node2")');
  assert.equal(synchronousStandbyNames(3, [1]), 'ANY 1 ("node1")');
  assert.equal(synchronousStandbyNames(0, [1]), '');
  assert.equal(synchronousStandbyNames(1, []), '');
});

test('a standby connects over loopback with TLS verified, as its node', () => {
  const c = standbyConninfo({ primaryPort: 16001, secret: "a'b", name: 'node2', pgdata: '/d/p' });
  assert.match(c, /host='127\.0\.0\.1' port='16001' user='basin_replication' password='a\\'b'/);
  assert.match(
    c,
    /application_name='node2' sslmode='verify-full' sslrootcert='\/d\/p\/replication-ca.crt'/,
  );
});

test('HAProxy: one frontend per service, the primary alone enabled; which one is not structure', () => {
  const a = renderService(
    'svc1',
    16000,
    [
      { index: 1, host: '127.0.0.1', port: 16002, enabled: false },
      { index: 0, host: '127.0.0.1', port: 16001, enabled: true },
    ],
    '*',
    ['0.0.0.0/0', '::/0'],
  );
  assert.match(a.text, /bind :::16000 v4v6/);
  assert.match(
    a.text,
    /server node0 127\.0\.0\.1:16001 check\n {4}server node1 127\.0\.0\.1:16002 check disabled/,
  );
  const b = renderService(
    'svc1',
    16000,
    [
      { index: 1, host: '127.0.0.1', port: 16002, enabled: true },
      { index: 0, host: '127.0.0.1', port: 16001, enabled: false },
    ],
    '*',
    ['0.0.0.0/0', '::/0'],
  );
  assert.notEqual(a.text, b.text);
  assert.equal(a.structure, b.structure, 'a failover needs no reload');
  assert.match(
    renderService('s', 1, [], '127.0.0.1, ::1', ['0.0.0.0/0', '::/0']).text,
    /bind 127\.0\.0\.1:1\n {4}bind ipv6@::1:1 v6only/,
  );
  assert.doesNotMatch(a.text, /tcp-request/, 'the public default admits everyone');
});

test("HAProxy enforces a service's access rules: behind it, every node sees loopback", () => {
  const servers = [{ index: 0, host: '127.0.0.1', port: 16001, enabled: true }];
  const inVpc = renderService('s', 16000, servers, '*', ['10.1.0.0/16', '10.9.0.0/24']);
  assert.match(
    inVpc.text,
    /tcp-request connection reject unless \{ src 10\.1\.0\.0\/16 10\.9\.0\.0\/24 \}/,
  );
  assert.match(inVpc.structure, /tcp-request/, 'a change of the rules reloads HAProxy');
  assert.match(renderService('s', 16000, servers, '*', []).text, /tcp-request connection reject\n/);
  // The nodes admit loopback (the proxy) besides the rules; a node on the endpoint's own port does not.
  const proxied = { allowedCidrs: ['10.1.0.0/16'], port: 16000, nodes: [{ port: 16001 }] };
  assert.match(pgHba(proxied, []), /hostssl\s+all\s+all\s+127\.0\.0\.1\/32\s+scram-sha-256/);
  const direct = { allowedCidrs: ['10.1.0.0/16'], port: 16000, nodes: [{ port: 16000 }] };
  assert.doesNotMatch(pgHba(direct, []), /127\.0\.0\.1\/32\s+scram/);
});

test('in network namespaces: nodes admit their gateway instead of loopback, replication both', () => {
  const from = namespaceSources('198.18.0.4');
  const proxied = { allowedCidrs: ['10.1.0.0/16'], port: 16000, nodes: [{ port: 16001 }] };
  const hba = pgHba(proxied, [], false, true, from);
  // HAProxy and this host's clients arrive from the gateway: admitted, the proxy enforcing the VPC.
  assert.match(hba, /hostssl\s+all\s+all\s+198\.18\.0\.4\/32\s+scram-sha-256/);
  assert.doesNotMatch(hba, /all\s+all\s+127\.0\.0\.1\/32/, 'loopback is the tenant itself now');
  // HA standbys stream over the namespace's loopback; a read replica set's nodes, translated, from the gateway.
  for (const db of ['replication', 'postgres']) {
    for (const a of ['127\\.0\\.0\\.1\\/32', '::1\\/128', '198\\.18\\.0\\.4\\/32']) {
      assert.match(
        hba,
        new RegExp(`hostssl\\s+${db}\\s+basin_replication\\s+${a}\\s+scram-sha-256`),
      );
    }
  }
  // A node on the endpoint's own port admits the access rules alone.
  const direct = { allowedCidrs: ['10.1.0.0/16'], port: 16000, nodes: [{ port: 16000 }] };
  assert.doesNotMatch(pgHba(direct, [], false, true, from), /all\s+all\s+198\.18\.0\.4/);
  assert.deepEqual(pgHba(proxied, []), pgHba(proxied, [], false, false, HOST_NETWORK));
});

test("HAProxy reaches a node at its namespace's address", () => {
  const { text, structure } = renderService(
    'svc1',
    16000,
    [{ index: 0, host: '198.18.0.5', port: 16001, enabled: true }],
    '*',
    ['0.0.0.0/0', '::/0'],
  );
  assert.match(text, /server node0 198\.18\.0\.5:16001 check\n/);
  // Another address is set through the runtime API, not by a reload, whose
  // handover of the listening socket could drop a connection being accepted.
  assert.doesNotMatch(structure, /198\.18\.0\.5/, 'another address does not reload HAProxy');
  assert.match(structure, /server node0 check/);
});

test("a read replica set's node reaches its service through the host, the certificate checked for localhost", () => {
  const c = standbyConninfo({
    primaryPort: 16001,
    secret: 's',
    name: 'rs_x_0',
    pgdata: '/d/p',
    via: '198.18.0.2',
  });
  assert.match(
    c,
    /^host='localhost' hostaddr='198\.18\.0\.2' port='16001' user='basin_replication'/,
  );
  assert.match(c, /sslmode='verify-full'/);
});
