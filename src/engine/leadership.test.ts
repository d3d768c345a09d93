import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { silentLogger } from '../lib/logger.js';
import type { LeadershipRepo } from '../store/store.js';
import { Leadership } from './leadership.js';

/** A lease row in memory, on a clock the test moves. */
function fakeRepo(clock: { now: number }) {
  const row = { term: 0, holder: null as string | null, expiresAt: 0 };
  let reachable = true;
  const check = () => {
    if (!reachable) throw new Error('store unreachable');
  };
  const repo: LeadershipRepo = {
    async acquire(holder, leaseMs) {
      check();
      if (row.expiresAt >= clock.now && row.term > 0) return undefined;
      const previous = row.holder;
      Object.assign(row, { term: row.term + 1, holder, expiresAt: clock.now + leaseMs });
      return { term: row.term, previous };
    },
    async renew(term, leaseMs) {
      check();
      if (row.term !== term) return false;
      row.expiresAt = clock.now + leaseMs;
      return true;
    },
    async release(term) {
      if (row.term === term) Object.assign(row, { expiresAt: clock.now - 1, holder: null });
    },
    async current() {
      return { term: row.term, holder: row.holder, remainingMs: row.expiresAt - clock.now };
    },
  };
  return { repo, row, cut: (v: boolean) => (reachable = !v) };
}

const options = (clock: { now: number }) => ({
  leaseMs: 3000,
  pollMs: 10,
  marginMs: 500,
  now: () => clock.now,
});

test('leadership: the first candidate leads; a second waits; a clean close hands over at once', async () => {
  const clock = { now: 1000 };
  const { repo } = fakeRepo(clock);
  const events: string[] = [];
  const role = (name: string) => ({
    lead: async (term: number) => void events.push(`${name} leads ${term}`),
    lost: (term: number, reason: string) => void events.push(`${name} lost ${term}: ${reason}`),
  });
  const a = new Leadership(repo, role('a'), silentLogger, { ...options(clock), holder: 'a' });
  const b = new Leadership(repo, role('b'), silentLogger, { ...options(clock), holder: 'b' });
  a.start();
  await sleep(30);
  b.start();
  await sleep(50);
  assert.deepEqual(events, ['a leads 1']);
  assert.equal(a.mayAct(), true);
  assert.equal(b.mayAct(), false);
  await a.close();
  await sleep(50);
  assert.deepEqual(events, ['a leads 1', 'b leads 2']);
  assert.equal(a.mayAct(), false);
  await b.close();
});

test('leadership: the guard lapses lease - margin after the last renewal was sent; a renewal of the same term confirms it again', async () => {
  const clock = { now: 1000 };
  const { repo, cut, row } = fakeRepo(clock);
  const lost: string[] = [];
  const a = new Leadership(
    repo,
    { lead: async () => undefined, lost: (_t, reason) => void lost.push(reason) },
    silentLogger,
    { ...options(clock), leaseMs: 300, marginMs: 50, holder: 'a' },
  );
  a.start();
  await sleep(30);
  assert.equal(a.leading, 1);
  cut(true); // renewals fail from now on
  clock.now += 240;
  assert.equal(a.mayAct(), true, 'within lease - margin');
  clock.now += 20;
  assert.equal(a.mayAct(), false, 'past lease - margin (250 ms)');
  assert.deepEqual(lost, [], 'not lost: nobody took the lease');
  // The store answers again, and nobody took the term: acting again.
  cut(false);
  await sleep(250);
  assert.equal(a.mayAct(), true);
  // Lapsed again, and meanwhile another took the lease: lost for good.
  cut(true);
  clock.now += 1000;
  assert.equal(a.mayAct(), false);
  Object.assign(row, { term: 2, holder: 'b' });
  cut(false);
  await sleep(250);
  assert.equal(a.mayAct(), false);
  assert.equal(a.leading, undefined);
  assert.match(lost[0] ?? '', /taken/);
  await a.close();
});

test('leadership: a renewal refused (another took the lease: a paused leader resumed) loses it', async () => {
  const clock = { now: 1000 };
  const { repo, row } = fakeRepo(clock);
  const lost: string[] = [];
  const a = new Leadership(
    repo,
    { lead: async () => undefined, lost: (_t, reason) => void lost.push(reason) },
    silentLogger,
    { ...options(clock), leaseMs: 60, marginMs: 10, holder: 'a' },
  );
  a.start();
  await sleep(10);
  assert.equal(a.leading, 1);
  Object.assign(row, { term: 2, holder: 'b' });
  await sleep(100);
  assert.equal(a.mayAct(), false);
  assert.match(lost[0] ?? '', /taken/);
  // A fenced write loses nothing more: lost once.
  a.fenced(1, 2);
  assert.equal(lost.length, 1);
  await a.close();
  assert.equal(row.term, 2, 'a deposed leader releases nothing');
});

test('leadership: a new leader fences the holder whose lease expired before it leads, and nobody after a release', async () => {
  const clock = { now: 1000 };
  const { repo } = fakeRepo(clock);
  const events: string[] = [];
  const make = (name: string) =>
    new Leadership(
      repo,
      {
        lead: async (term) => void events.push(`${name} leads ${term}`),
        lost: () => undefined,
      },
      silentLogger,
      {
        ...options(clock),
        holder: name,
        fence: async (holder) => {
          events.push(`${name} fences ${holder}`);
          return 'killed';
        },
      },
    );
  const a = make('a');
  a.start();
  await sleep(30);
  // a stalls (its next renewal is a second away): its lease expires by
  // the store's clock, and b takes it.
  clock.now += 5_000;
  const b = make('b');
  b.start();
  await sleep(30);
  // b hands over cleanly: c fences nobody.
  await b.close();
  const c = make('c');
  c.start();
  await sleep(30);
  assert.deepEqual(events, ['a leads 1', 'b fences a', 'b leads 2', 'c leads 3']);
  await Promise.all([a.close(), c.close()]);
});
