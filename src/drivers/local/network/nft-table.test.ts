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
  // TCP from source ports below the untracked client ports (notrack_in).
  assert.match(
    t,
    /oifname @veths ip saddr 127\.0\.0\.0\/8 meta l4proto tcp masquerade to :1024-32767 oifname @veths ip saddr 127\.0\.0\.0\/8 masquerade/,
  );
  assert.match(
    t,
    /oifname @veths ip saddr \. ip daddr @snat_pairs meta l4proto tcp masquerade to :1024-32767 oifname @veths ip saddr \. ip daddr @snat_pairs masquerade/,
  );
  assert.match(t, /ip saddr 198\.18\.0\.0\/15 oifname != "bsn\*" masquerade/);
  // No other client is translated: pg_hba and the VPC rules see who connects.
  assert.equal((t.match(/masquerade|snat to/g) ?? []).length, 5);
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

test("untracked: the host's own connections to a namespace's ports, and their answers", () => {
  const text = renderTable({
    installation: TAG,
    block: '198.18.0.0/15',
    restrictForwarding: false,
    namespaces: [service, replicaSet],
  });
  const t = squeeze(text);
  assert.match(
    t,
    /set direct \{ type ifname \. ipv4_addr \. ipv4_addr \. inet_service elements = \{ "bsn000000000002" \. 198\.18\.0\.3 \. 198\.18\.0\.2 \. 16003, "bsn000000000001" \. 198\.18\.0\.1 \. 198\.18\.0\.0 \. 16002, "bsn000000000001" \. 198\.18\.0\.1 \. 198\.18\.0\.0 \. 16001 \} \}/,
  );
  assert.match(t, /set forwarded \{ type inet_service elements = \{ 16001, 16002, 16003 \} \}/);
  // In: the namespace's answers to a client port of the range, never its
  // own SYN, never to a port that leads into a namespace (translated).
  assert.match(
    t,
    /chain notrack_in \{ type filter hook prerouting priority raw; policy accept; tcp dport 32768-65535 tcp flags & \(syn \| ack\) != syn iifname \. ip saddr \. ip daddr \. tcp sport @direct tcp dport != @forwarded notrack \}/,
  );
  // Out: from the gateway and a client port of the range to its address and port.
  assert.match(
    t,
    /chain notrack_out \{ type filter hook output priority raw; policy accept; tcp sport 32768-65535 oifname \. ip daddr \. ip saddr \. tcp dport @direct notrack \}/,
  );
  // What is untracked is never forwarded into a namespace.
  assert.match(
    t,
    /oifname @veths ct state established,related accept oifname @veths ct status dnat accept oifname @veths drop/,
  );
  nftAccepts(text);
  // No port leads into a namespace: no raw hooks, which every packet would pass.
  const none = renderTable({
    installation: TAG,
    block: '198.18.0.0/15',
    restrictForwarding: false,
    namespaces: [{ ...service, ports: [] }],
  });
  assert.doesNotMatch(none, /notrack|priority raw/);
  nftAccepts(none);
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
