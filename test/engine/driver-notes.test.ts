// What the driver tells outside any operation (engine/driver-notes.ts),
// through the real SQLite store: a note at a time of its own is written at
// that time; one to be told once is not written twice, whether read again
// at the same time (a Patroni log line read again) or, for a fact that is
// told `ever` once (a leader change: one timeline), by a later reading.

import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import type { Service } from '../../src/domain/types.js';
import { recordNote } from '../../src/engine/driver-notes.js';
import { scramVerifier } from '../../src/lib/secrets.js';
import { openSqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { tempDir } from '../helpers.js';

const NOW = Date.parse('2030-01-01T00:00:00Z');

test('a note told once is written once; others each time; a gone service gets none', async (t) => {
  const store = openSqliteStore(join(tempDir(t), 'basin.db'));
  t.after(() => store.close());
  const svc: Service = {
    id: 's1',
    projectId: 'p1',
    name: 's1',
    regionCode: 'us-east-1',
    type: 'POSTGRES',
    vector: false,
    status: 'READY',
    environment: 'DEV',
    size: { shared: false, cpuMillis: 500, memoryGbs: 2 },
    port: 20_000,
    pooler: { enabled: false, port: null },
    vpcId: null,
    forkedFrom: null,
    ha: { replicaCount: 2, syncReplicaCount: 1 },
    passwordVerifier: scramVerifier('notes-test-password'),
    createdAt: new Date(NOW).toISOString(),
    version: 1,
  };
  await store.transaction((tx) => tx.services.insert(svc));
  let now = NOW;
  const deps = { store, clock: () => now };
  const target = { kind: 'service' as const, id: 's1' };
  const listed = async () =>
    (await store.events.list('service', 's1', { node: 0, severities: [], search: [], limit: 100 }))
      .map((e) => `${e.at - NOW} ${e.message}`)
      .reverse();

  // A line of Patroni's log, at its own time, read twice: one entry, at that time.
  const line = {
    severity: 'WARNING' as const,
    message: 'patroni: node1 (on h2, 10.0.0.2): promoted to primary (took the leader lock)',
    at: NOW - 5000,
    once: 'at' as const,
  };
  assert.equal(await recordNote(deps, target, line), true);
  now += 1000;
  assert.equal(await recordNote(deps, target, line), false);
  // The same words at another time are another event.
  assert.equal(await recordNote(deps, target, { ...line, at: NOW - 1000 }), true);

  // A leader change, told once per timeline: a second reading (another
  // process's, with other words) of timeline 2 writes nothing; timeline 3 does.
  const ever = (t: number) => ({ ever: ['patroni: ', `(timeline ${t})`] });
  const failover = { severity: 'WARNING' as const, message: 'patroni: failover: node1 (on h2, 10.0.0.2) was promoted (timeline 2); the primary node0 (on h1, 10.0.0.1) is gone', once: ever(2) }; // prettier-ignore
  assert.equal(await recordNote(deps, target, failover), true);
  now += 1000;
  const leads = { severity: 'LOG' as const, message: 'patroni: node1 (on h2, 10.0.0.2) leads (timeline 2)', once: ever(2) }; // prettier-ignore
  assert.equal(await recordNote(deps, target, leads), false);
  assert.equal(await recordNote(deps, target, { ...leads, message: leads.message.replace('(timeline 2)', '(timeline 3)'), once: ever(3) }), true); // prettier-ignore
  // Without `once`, each note is written.
  const plain = { severity: 'LOG' as const, message: 'basin: something' };
  assert.equal(await recordNote(deps, target, plain), true);
  assert.equal(await recordNote(deps, target, plain), true);

  assert.deepEqual(await listed(), [
    `-5000 ${line.message}`,
    `-1000 ${line.message}`,
    `1000 ${failover.message}`,
    `2000 patroni: node1 (on h2, 10.0.0.2) leads (timeline 3)`,
    '2000 basin: something',
    '2000 basin: something',
  ]);
  assert.equal(await recordNote(deps, { kind: 'service', id: 'gone' }, plain), false);
});
