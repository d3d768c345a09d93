// The installation's nftables table, rendered from its namespaces: what
// each part translates or filters, and that nft itself accepts the text
// (`nft -c`: checked against the kernel, nothing loaded).

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { test } from 'node:test';
import {
  dropTable,
  forwardedPorts,
  renderTable,
  type TableNamespace,
  tableName,
} from './nft-table.js';

const TAG = '0123456789abcdef';
const service: TableNamespace = {
  id: 'svc1',
  veth: 'bsn000000000001',
  address: '198.18.0.1',
  hostAddress: '198.18.0.0',
  ports: [16002, 16001],
  hostPorts: [8432],
};
const replicaSet: TableNamespace = {
  id: 'rs1',
  veth: 'bsn000000000002',
  address: '198.18.0.3',
  hostAddress: '198.18.0.2',
  ports: [16003],
  streamsFrom: 'svc1',
  hostPorts: [],
};

/** The table with no element lists, whitespace squeezed, for regular expressions. */
const squeeze = (text: string) => text.replace(/\s+/g, ' ');

/** Whether nft accepts `text` (a dry run: nothing is loaded). */
function nftAccepts(text: string): void {
  execFileSync('nft', ['-c', '-f', '-'], { input: text, stdio: ['pipe', 'pipe', 'pipe'] });
}

test('ports lead into their namespace, from other hosts and from this one, same port', () => {
  const text = renderTable({
    installation: TAG,
    block: '198.18.0.0/15',
    restrictForwarding: false,
    namespaces: [service, replicaSet],
  });
  const t = squeeze(text);
  assert.match(
    t,
    /map ports \{ type inet_service : ipv4_addr elements = \{ 16001 : 198\.18\.0\.1, 16002 : 198\.18\.0\.1, 16003 : 198\.18\.0\.3 \} \}/,
  );
  for (const hook of ['prerouting', 'output']) {
    assert.match(
      t,
      new RegExp(
        `chain ${hook} \\{ type nat hook ${hook} priority -100; policy accept; fib daddr type local dnat ip to tcp dport map @ports \\}`,
      ),
    );
  }
  assert.match(
    t,
    /set veths \{ type ifname elements = \{ "bsn000000000002", "bsn000000000001" \} \}/,
  );
  nftAccepts(text);
});

test('SNAT: loopback clients, a set to its service, a namespace to itself; egress masqueraded', () => {
  const t = squeeze(
    renderTable({
      installation: TAG,
      block: '198.18.0.0/15',
      restrictForwarding: false,
      namespaces: [service, replicaSet],
    }),
  );
  assert.match(
    t,
    /set snat_pairs \{ type ipv4_addr \. ipv4_addr elements = \{ 198\.18\.0\.3 \. 198\.18\.0\.3, 198\.18\.0\.3 \. 198\.18\.0\.1, 198\.18\.0\.1 \. 198\.18\.0\.1 \} \}/,
  );
  assert.match(t, /oifname @veths ip saddr 127\.0\.0\.0\/8 masquerade/);
  assert.match(t, /oifname @veths ip saddr \. ip daddr @snat_pairs masquerade/);
  assert.match(t, /ip saddr 198\.18\.0\.0\/15 oifname != "bsn\*" masquerade/);
  // No other client is translated: pg_hba and the VPC rules see who connects.
  assert.equal((t.match(/masquerade|snat to/g) ?? []).length, 3);
});

test('a set whose service has no namespace (yet) streams untranslated', () => {
  const t = squeeze(
    renderTable({
      installation: TAG,
      block: '198.18.0.0/15',
      restrictForwarding: false,
      namespaces: [replicaSet],
    }),
  );
  assert.match(t, /elements = \{ 198\.18\.0\.3 \. 198\.18\.0\.3 \}/);
});

test('forwarding: into a namespace only what was translated to it; Basin only on a host that did not forward', () => {
  const open = squeeze(
    renderTable({
      installation: TAG,
      block: '198.18.0.0/15',
      restrictForwarding: false,
      namespaces: [service],
    }),
  );
  assert.match(
    open,
    /chain forward \{ type filter hook forward priority 0; policy accept; oifname @veths ct state established,related accept oifname @veths ct status dnat accept oifname @veths drop \}/,
  );
  const restricted = renderTable({
    installation: TAG,
    block: '198.18.0.0/15',
    restrictForwarding: true,
    namespaces: [service],
  });
  assert.match(
    squeeze(restricted),
    /oifname @veths drop iifname "bsn\*" accept oifname "bsn\*" accept drop \}/,
  );
  nftAccepts(restricted);
});

test('a reserved host port: its namespace and the host only', () => {
  const text = renderTable({
    installation: TAG,
    block: '198.18.0.0/15',
    restrictForwarding: false,
    namespaces: [service, replicaSet],
  });
  const t = squeeze(text);
  assert.match(
    t,
    /set reserved \{ type ipv4_addr \. inet_service elements = \{ 198\.18\.0\.0 \. 8432 \} \}/,
  );
  assert.match(
    t,
    /set reserved_for \{ type ifname \. ipv4_addr \. ipv4_addr \. inet_service elements = \{ "bsn000000000001" \. 198\.18\.0\.1 \. 198\.18\.0\.0 \. 8432 \} \}/,
  );
  assert.match(
    t,
    /chain input \{ type filter hook input priority 0; policy accept; ip daddr \. tcp dport @reserved jump reserved \}/,
  );
  assert.match(
    t,
    /chain reserved \{ iif "lo" accept iifname \. ip saddr \. ip daddr \. tcp dport @reserved_for accept reject with tcp reset \}/,
  );
});

test("a namespace admitted to another's reserved port reaches it too; one without a record admits nothing", () => {
  const { streamsFrom: _service, ...bare } = replicaSet;
  const fork: TableNamespace = { ...bare, id: 'fork1' };
  const text = renderTable({
    installation: TAG,
    block: '198.18.0.0/15',
    restrictForwarding: false,
    namespaces: [{ ...service, hostGuests: ['fork1', 'gone1'] }, fork],
  });
  nftAccepts(text);
  assert.match(
    squeeze(text),
    /set reserved_for \{ type ifname \. ipv4_addr \. ipv4_addr \. inet_service elements = \{ "bsn000000000001" \. 198\.18\.0\.1 \. 198\.18\.0\.0 \. 8432, "bsn000000000002" \. 198\.18\.0\.3 \. 198\.18\.0\.0 \. 8432 \} \}/,
  );
});

test('a port two records claim goes to one of them; an empty installation still loads', () => {
  const clash = { ...replicaSet, ports: [16001, 16003] };
  const t = squeeze(
    renderTable({
      installation: TAG,
      block: '198.18.0.0/15',
      restrictForwarding: false,
      namespaces: [service, clash],
    }),
  );
  assert.match(
    t,
    /elements = \{ 16001 : 198\.18\.0\.3, 16002 : 198\.18\.0\.1, 16003 : 198\.18\.0\.3 \}/,
  );
  const empty = renderTable({
    installation: TAG,
    block: '10.99.0.0/24',
    restrictForwarding: true,
    namespaces: [],
  });
  assert.doesNotMatch(empty, /elements/);
  // No reserved port: no input hook, which every packet the host receives would pass.
  assert.doesNotMatch(empty, /hook input/);
  nftAccepts(empty);
});

test('the table is replaced whole, in one transaction; dropping a missing one is no error', () => {
  const text = renderTable({
    installation: TAG,
    block: '198.18.0.0/15',
    restrictForwarding: false,
    namespaces: [],
  });
  const name = tableName(TAG);
  assert.equal(name, 'basin-0123456789abcdef');
  assert.ok(text.startsWith(`table ip ${name} {}\ndelete table ip ${name}\ntable ip ${name} {\n`));
  assert.equal(dropTable(TAG), `table ip ${name} {}\ndelete table ip ${name}\n`);
  nftAccepts(dropTable(TAG));
});

test("a parked port leads to the namespace's host side, where the waker listens; the others into it", () => {
  const namespaces = [{ ...service, parked: [16001] }, replicaSet];
  const text = renderTable({
    installation: TAG,
    block: '198.18.0.0/15',
    restrictForwarding: false,
    namespaces,
  });
  nftAccepts(text);
  assert.match(
    squeeze(text),
    /elements = \{ 16001 : 198\.18\.0\.0, 16002 : 198\.18\.0\.1, 16003 : 198\.18\.0\.3 \}/,
  );
  // The local redirect (connect-redirect.ts) follows the same map.
  assert.deepEqual(
    [...forwardedPorts(namespaces)].sort(([a], [b]) => a - b),
    [
      [16001, '198.18.0.0'],
      [16002, '198.18.0.1'],
      [16003, '198.18.0.3'],
    ],
  );
});
