// The store contract (store-contract.ts) against the PostgreSQL store, on a
// real PostgreSQL 15 that this file starts (test/store-postgres.ts) and
// removes, and what only a store shared by processes over a network has:
// another store object's commits reach this one's read view, migrations
// from two openers at once, transactions of two openers that stay serial.

import assert from 'node:assert/strict';
import { after, test, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { AppError } from '../../src/domain/errors.js';
import { FencedError, type UsageRound } from '../../src/store/store.js';
import { serviceDelete } from '../../src/domain/operations.js';
import type { Credential, Service } from '../../src/domain/types.js';
import { PG_MIGRATIONS } from '../../src/store/postgres/migrations.js';
import { openPostgresStore, type PostgresStore } from '../../src/store/postgres/pg-store.js';
import { type StorePostgres, startStorePostgres } from '../store-postgres.js';
import { storeContract } from './store-contract.js';

let cluster: Promise<StorePostgres> | undefined;
after(async () => {
  await (await cluster)?.stop();
});
/** One cluster for the file (stopped by `after`), one database per test. */
const pgc = () => (cluster ??= startStorePostgres({ after: () => undefined }));
let databases = 0;
const freshUrl = async () => (await pgc()).createDatabase(`store_${++databases}`);

/** Opens the store at `url`, ended (every connection closed) when the test ends. */
async function openAt(t: TestContext, url: string): Promise<PostgresStore> {
  const store = await openPostgresStore(url);
  t.after(() => store.end());
  return store;
}

storeContract('postgres', {
  async open(t) {
    const url = await freshUrl();
    const store = await openAt(t, url);
    return {
      store,
      async insertRawOperation(row) {
        const res = await (
          await pgc()
        ).sql(
          `INSERT INTO operations (kind, resource_kind, resource_id, project_id, state, payload,
             run_after, created_at, updated_at)
           VALUES ($1, $2, $3, $4, 'pending', $5, 0, '1970-01-01T00:00:00.000Z', '1970-01-01T00:00:00.000Z')
           RETURNING id`,
          [row.kind, row.resourceKind, row.resourceId, row.projectId, row.payload],
          new URL(url).pathname.slice(1),
        );
        return Number((res.rows[0] as { id: string }).id);
      },
    };
  },
});

const credential = (id: string): Credential => ({
  id,
  kind: 'project',
  projectId: 'p1',
  userId: null,
  name: id,
  bearerHash: `bearer-${id}`,
  accessKey: `AK-${id}`,
  secretHash: 's'.repeat(64),
  createdAt: new Date(0).toISOString(),
  revokedAt: null,
});

test('postgres: a credential revoked through one store object is refused by another one’s read view within 1 s', async (t) => {
  const url = await freshUrl();
  const a = await openAt(t, url);
  const b = await openAt(t, url);
  await a.transaction(async (tx) => {
    await tx.projects.insert({ id: 'p1', name: 'one', createdAt: new Date(0).toISOString() });
    await tx.credentials.insert(credential('c1'));
  });
  // a's own commit is in a's view as soon as the transaction returns.
  assert.equal(a.readView().credentials.findByBearerHash('bearer-c1')?.id, 'c1');
  await waitFor(() => b.readView().credentials.findByAccessKey('AK-c1')?.revokedAt === null);

  await a.transaction((tx) => tx.credentials.revoke('c1', new Date(1).toISOString()));
  await sleep(1000);
  assert.equal(
    b.readView().credentials.findByBearerHash('bearer-c1')?.revokedAt,
    new Date(1).toISOString(),
  );
  assert.equal(
    b.readView().credentials.findByAccessKey('AK-c1')?.revokedAt,
    new Date(1).toISOString(),
  );
});

test('postgres: a credential another store object just made is in the view once caught up; unknown and revoked ones are not', async (t) => {
  const url = await freshUrl();
  const a = await openAt(t, url);
  const b = await openAt(t, url);
  await a.transaction(async (tx) => {
    await tx.projects.insert({ id: 'p1', name: 'one', createdAt: new Date(0).toISOString() });
    await tx.credentials.insert(credential('c1'));
  });
  // Whether or not b's notification came first, b's view has it after the catch-up.
  await b.catchUpCredential({ bearerHash: 'bearer-c1' });
  assert.equal(b.readView().credentials.findByBearerHash('bearer-c1')?.id, 'c1');
  assert.equal(await b.catchUpCredential({ bearerHash: 'bearer-c1' }), false, 'known already');
  assert.equal(await b.catchUpCredential({ bearerHash: 'bearer-nobody' }), false);
  assert.equal(await b.catchUpCredential({ accessKey: 'AK-nobody' }), false);

  await a.transaction(async (tx) => {
    await tx.credentials.insert(credential('c2'));
    await tx.credentials.revoke('c2', new Date(1).toISOString());
  });
  assert.equal(await b.catchUpCredential({ accessKey: 'AK-c2' }), false, 'revoked');
});

test('postgres: the read view follows commits of the same and of other store objects (services, projects of users)', async (t) => {
  const url = await freshUrl();
  const a = await openAt(t, url);
  const b = await openAt(t, url);
  const at = new Date(0).toISOString();
  const service = { id: 's1', projectId: 'p1', name: 'db', createdAt: at, version: 1 };
  await a.transaction(async (tx) => {
    await tx.projects.insert({ id: 'p1', name: 'one', createdAt: at });
    await tx.users.insert({ id: 'u1', name: 'alice', email: null, createdAt: at });
    await tx.users.addToProject('u1', 'p1');
    await tx.services.insert(service as never);
  });
  const view = a.readView();
  assert.deepEqual(view.users.projectIds('u1'), ['p1']);
  assert.equal(view.services.get('s1')?.version, 1);
  assert.deepEqual(
    view.services.listByProject('p1').map((s) => s.id),
    ['s1'],
  );
  assert.ok(Object.isFrozen(view.services.get('s1')));
  await b.transaction(async (tx) => {
    const s = await tx.services.get('s1');
    await tx.services.update({ ...(s as typeof service), name: 'renamed' } as never);
  });
  assert.equal(b.readView().services.get('s1')?.version, 2);
  await waitFor(() => a.readView().services.get('s1')?.version === 2);
  await b.transaction((tx) => tx.services.delete('s1'));
  await waitFor(() => a.readView().services.get('s1') === undefined);
  assert.deepEqual(a.readView().services.listByProject('p1'), []);
  // A rolled-back write never shows.
  await assert.rejects(
    b.transaction(async (tx) => {
      await tx.users.addToProject('u1', 'p1');
      await tx.services.insert({ ...service, id: 's2' } as never);
      throw new Error('boom');
    }),
    /boom/,
  );
  await sleep(200);
  assert.equal(a.readView().services.get('s2'), undefined);
});

test('postgres: transactions of two store objects are serial: counters taken at once never repeat', async (t) => {
  const url = await freshUrl();
  const a = await openAt(t, url);
  const b = await openAt(t, url);
  const take = (s: PostgresStore) =>
    s.transaction(async (tx) => {
      // Read, then write from what was read: a lost update unless serial.
      const seen = (await tx.ports.get('last')) ?? 0;
      await tx.ports.release('last');
      await sleep(5);
      await tx.ports.allocate('last', seen + 1, seen + 1);
      return tx.counters.next('uid', 1000);
    });
  const values = await Promise.all([...Array(10)].map((_, i) => take(i % 2 ? a : b)));
  assert.deepEqual(
    [...values].sort((x, y) => x - y),
    [...Array(10)].map((_, i) => 1000 + i),
  );
  assert.equal(await a.ports.get('last'), 10);
});

test('postgres: two openers at once migrate once; a store of a newer schema is refused', async (t) => {
  const url = await freshUrl();
  const [a, b] = await Promise.all([openAt(t, url), openAt(t, url)]);
  assert.equal(await a.projects.count(), 0);
  assert.equal(await b.projects.count(), 0);
  const db = new URL(url).pathname.slice(1);
  const version = await (await pgc()).sql('SELECT version FROM basin_schema', [], db);
  assert.deepEqual(version.rows, [{ version: PG_MIGRATIONS.length }]);
  await (await pgc()).sql('UPDATE basin_schema SET version = version + 1', [], db);
  await assert.rejects(openPostgresStore(url), /written by a newer Basin/);
});

test('postgres: a store that cannot be reached is UNAVAILABLE, and says where', async (t) => {
  const url = await freshUrl();
  const store = await openAt(t, url);
  const db = new URL(url).pathname.slice(1);
  await (
    await pgc()
  ).sql('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1', [db]);
  await (await pgc()).sql(`ALTER DATABASE ${db} ALLOW_CONNECTIONS false`);
  await assert.rejects(store.projects.count(), (err: unknown) => {
    assert.ok(err instanceof AppError, String(err));
    assert.equal(err.code, 'UNAVAILABLE');
    assert.match(err.message, /PostgreSQL at 127\.0\.0\.1:\d+\/store_\d+/);
    return true;
  });
  await (await pgc()).sql(`ALTER DATABASE ${db} ALLOW_CONNECTIONS true`);
  assert.equal(await store.projects.count(), 0);
});

test('postgres: an operation queued through one store object wakes another’s queue watch (the leader’s engine)', async (t) => {
  const url = await freshUrl();
  const leader = await openAt(t, url);
  const follower = await openAt(t, url);
  let woken = 0;
  leader.watchQueue?.(() => woken++);
  await follower.transaction((tx) =>
    tx.vpcs.insert({
      id: 'v',
      projectId: 'p1',
      name: 'v',
      cidr: '10.0.0.0/16',
      regionCode: 'us-east-1',
      createdAt: new Date(0).toISOString(),
      version: 1,
    }),
  );
  await sleep(300);
  assert.equal(woken, 0, 'other writes wake nothing');
  await follower.transaction((tx) =>
    tx.operations.enqueue(serviceDelete({ id: 's1', projectId: 'p1' } as Service), 0),
  );
  await waitFor(() => woken === 1);
});

test('postgres: usage rounds the leader publishes reach every store object in order, a day is kept, and a deposed leader publishes nothing', async (t) => {
  const url = await freshUrl();
  const leader = await openAt(t, url);
  const follower = await openAt(t, url);
  const round = (at: number): UsageRound => ({
    at,
    keep: ['s1'],
    metrics: { 'service:s1': { memoryMb: at, milliCpu: 1, storageMb: 2 } },
    series: { s1: [{ name: 'timescale_cloud_database_num_connections', labels: {}, value: at }] },
  });
  const day = 24 * 3600 * 1000;
  const term = (await leader.leadership.acquire('test/1', 60_000))?.term;
  assert.equal(term, 1);
  const fenced = leader.fenced(1);
  await fenced.usage!.publish(round(1_000));
  await fenced.usage!.publish(round(2_000));
  const seen: number[] = [];
  // The kept rounds first, then each one published after, in order.
  await follower.usage!.follow((r) => seen.push(r.at));
  assert.deepEqual(seen, [1_000, 2_000]);
  await fenced.usage!.publish(round(3_000));
  await waitFor(() => seen.length === 3);
  assert.deepEqual(seen, [1_000, 2_000, 3_000]);
  // A day later, the first rounds are dropped: a process starting now reads the rest.
  await fenced.usage!.publish(round(2_500 + day));
  const later: UsageRound[] = [];
  await leader.usage!.follow((r) => later.push(r));
  assert.deepEqual(
    later.map((r) => r.at),
    [3_000, 2_500 + day],
  );
  assert.deepEqual(later[0], round(3_000));
  // Another term leads: the old one's rounds are refused, nothing is kept.
  await leader.leadership.release(1);
  assert.equal((await follower.leadership.acquire('test/2', 60_000))?.term, 2);
  await assert.rejects(fenced.usage!.publish(round(5_000 + day)), FencedError);
  await sleep(300);
  assert.deepEqual(seen.at(-1), 2_500 + day);
});

test('postgres: a transaction paused while it holds the write lock is ended after 3 s, and the others go on', async (t) => {
  const url = await freshUrl();
  const a = await openAt(t, url);
  const b = await openAt(t, url);
  let resume!: () => void;
  const paused = new Promise<void>((r) => (resume = r));
  let holding!: () => void;
  const held = new Promise<void>((r) => (holding = r));
  const stuck = a.transaction(async (tx) => {
    await tx.vpcs.insert({
      id: 'stuck',
      projectId: 'p1',
      name: 'v',
      cidr: '10.0.0.0/16',
      regionCode: 'us-east-1',
      createdAt: new Date(0).toISOString(),
      version: 1,
    });
    holding();
    await paused;
    await tx.vpcs.get('stuck');
  });
  stuck.catch(() => undefined);
  await held;
  const since = Date.now();
  // b's transaction waits for the lock, then gets it once a's session is ended.
  await b.transaction((tx) =>
    tx.projects.insert({ id: 'p1', name: 'one', createdAt: new Date(0).toISOString() }),
  );
  assert.ok(Date.now() - since >= 2_500, 'b waited for the lock');
  resume();
  await assert.rejects(stuck);
  assert.equal(await b.vpcs.get('stuck'), undefined);
  assert.equal((await b.projects.get('p1'))?.id, 'p1');
});

async function waitFor(ok: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !ok(); i++) await sleep(25);
  assert.ok(ok(), 'not seen in 5 s');
}
