// The idle decision: which services may suspend, and when one should.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ServiceSpec } from '../../driver.js';
import { admits, decide, type IdleFacts, sampleEveryMs, whyAwake } from './idle-policy.js';

const spec = {
  serviceId: 'svc1',
  environment: 'DEV',
  running: true,
  port: 16001,
  pooler: { enabled: false, port: null },
  allowedCidrs: [],
  ha: { replicaCount: 0, syncReplicaCount: 0 },
  nodes: [{ index: 0, role: 'primary', port: 16001 }],
} as unknown as ServiceSpec;
const facts: IdleFacts = {
  namespaced: true,
  withReplicaSet: false,
  admitted: ['0.0.0.0/0', '::/0'],
  gateway: '198.18.0.0',
};
const policy = { afterMs: 60_000, environments: ['DEV'] as const };

test('a single-node service of a listed environment, in a namespace, may suspend', () => {
  assert.equal(whyAwake(spec, policy, facts), undefined);
});

test('what keeps a service awake, each said', () => {
  const cases: [ServiceSpec, IdleFacts, typeof policy | undefined, RegExp][] = [
    [spec, facts, undefined, /off/],
    [{ ...spec, environment: 'PROD' }, facts, policy, /environment PROD/],
    [{ ...spec, running: false }, facts, policy, /stopped/],
    [{ ...spec, ha: { replicaCount: 1, syncReplicaCount: 0 } }, facts, policy, /HA/],
    [
      { ...spec, nodes: [...spec.nodes, { index: 1, role: 'standby', port: 16002 }] },
      facts,
      policy,
      /HA/,
    ],
    [{ ...spec, pooler: { enabled: true, port: 16002 } }, facts, policy, /pooler/],
    [spec, { ...facts, withReplicaSet: true }, policy, /read replica set/],
    [spec, { ...facts, namespaced: false }, policy, /namespace/],
    [spec, { ...facts, gateway: undefined }, policy, /namespace/],
    // A VPC's rules: the gateway the server would see is not among them.
    [spec, { ...facts, admitted: ['10.0.0.0/16'] }, policy, /gateway/],
  ];
  for (const [s, f, p, why] of cases) assert.match(whyAwake(s, p, f) ?? '', why);
});

test('the clock starts at the first sample and again at every client; it suspends once idle long enough', () => {
  const after = 60_000;
  let step = decide(undefined, 0, 1_000, after);
  assert.deepEqual(step, { clock: { lastActiveAt: 1_000 }, suspend: false });
  step = decide(step.clock, 0, 60_999, after);
  assert.equal(step.suspend, false);
  step = decide(step.clock, 2, 61_000, after);
  assert.deepEqual(step, { clock: { lastActiveAt: 61_000 }, suspend: false });
  step = decide(step.clock, 0, 120_999, after);
  assert.equal(step.suspend, false);
  step = decide(step.clock, 0, 121_000, after);
  assert.deepEqual(step, { clock: { lastActiveAt: 61_000 }, suspend: true });
});

test('sampling: a quarter of the idle time, between 1 s and 10 s', () => {
  assert.equal(sampleEveryMs(2_000), 1_000);
  assert.equal(sampleEveryMs(20_000), 5_000);
  assert.equal(sampleEveryMs(3_600_000), 10_000);
});

test("the waker admits a client as the server's rules would", () => {
  assert.ok(admits(['0.0.0.0/0', '::/0'], '203.0.113.9'));
  assert.ok(admits(['10.0.0.0/8'], '::ffff:10.1.2.3'));
  assert.ok(!admits(['10.0.0.0/8'], '192.168.1.1'));
  assert.ok(admits(['198.18.0.0/32'], '198.18.0.0'));
  assert.ok(!admits([], '127.0.0.1'));
});
