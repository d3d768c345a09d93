// The restart policy of nodes that die on their own (restarts.ts), against a
// node state in memory and a clock the test moves: what is recorded, what
// the entries say, and when a restart is held.

import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { silentLogger } from '../../../lib/logger.js';
import { type NodeState, readNodeState, writeNodeState } from './node-state.js';
import type { Spawned } from './postmaster.js';
import {
  DEFAULT_RESTARTS,
  deathReason,
  holdRestart,
  restartDelayMs,
  stoppedByBasin,
} from './restarts.js';

const PGDATA = '/data/local/instances/s1/0/pgdata';
const REF = { id: 's1', node: 0 };
const POLICY = { baseMs: 1_000, capMs: 8_000, stableMs: 60_000 };

function node(exit?: Spawned['exit']) {
  const spawned = new Map<string, { proc: Spawned; sawReady: boolean }>();
  spawned.set(PGDATA, { proc: { pid: 42, ...(exit ? { exit } : {}) }, sawReady: true });
  const state: NodeState = { extensions: [] };
  let saves = 0;
  const ctx = { spawned, restarts: POLICY, log: silentLogger };
  return {
    ctx,
    state,
    saves: () => saves,
    hold: (now: number) => holdRestart(ctx, REF, PGDATA, state, async () => void saves++, now),
  };
}

test('restart delays: the first at once, then the base doubling up to the cap', () => {
  assert.deepEqual(
    [1, 2, 3, 4, 5, 6, 7, 50].map((n) => restartDelayMs(POLICY, n)),
    [0, 1_000, 2_000, 4_000, 8_000, 8_000, 8_000, 8_000],
  );
  assert.deepEqual(
    [2, 10, 11].map((n) => restartDelayMs(DEFAULT_RESTARTS, n)),
    [1_000, 256_000, 300_000],
  );
});

test('why a node is gone: its exit as Node saw it, or found not running', () => {
  const at = (exit?: Spawned['exit']) => deathReason(node(exit).ctx, PGDATA);
  assert.equal(at({ code: null, signal: 'SIGKILL' }), 'killed by SIGKILL');
  assert.equal(at({ code: 1, signal: null }), 'exited with code 1');
  assert.equal(at(undefined), 'found not running');
  assert.equal(deathReason({ spawned: new Map() }, PGDATA), 'found not running');
});

test('a node that keeps dying: each death an entry, its restart later each time; held until due', async () => {
  const n = node({ code: null, signal: 'SIGKILL' });
  let now = 1_000_000;
  // Never seen running (a new node, a failed start): nothing to hold.
  assert.equal(await n.hold(now), undefined);
  assert.equal(n.saves(), 0);

  const delays: number[] = [];
  const messages: string[] = [];
  for (let death = 1; death <= 6; death++) {
    n.state.upSince = now; // seen running
    now += 3_000; // ran 3 s, then died
    const held = await n.hold(now);
    assert.ok(held && !held.done);
    delays.push(held.retryAfterMs);
    assert.equal(held.notes?.length, 1);
    assert.equal(held.notes?.[0]?.severity, 'WARNING');
    messages.push(held.notes?.[0]?.message ?? '');
    assert.equal(n.state.upSince, undefined, 'the death is recorded once');
    assert.deepEqual(n.state.restarts, { count: death, dueAt: now + held.retryAfterMs });
    if (held.retryAfterMs > 0) {
      // Asked again before it is due: held, without another entry.
      const again = await n.hold(now + 1);
      assert.ok(again && !again.done);
      assert.equal(again.retryAfterMs, held.retryAfterMs - 1);
      assert.equal(again.notes, undefined);
    }
    now += held.retryAfterMs;
    assert.equal(await n.hold(now), undefined, 'due: it starts');
  }
  assert.deepEqual(delays, [0, 1_000, 2_000, 4_000, 8_000, 8_000]);
  assert.equal(
    messages[0],
    'basin: node0 stopped on its own (killed by SIGKILL) after running 3 s; restarting it',
  );
  assert.equal(
    messages[3],
    'basin: node0 stopped on its own (killed by SIGKILL) after running 3 s; restart 4 in a row, in 4 s (each waits twice as long, up to 8 s, until it runs for 60 s)',
  );

  // It ran for the stable time: its next death is a first one again.
  n.state.upSince = now;
  now += 60_000;
  const fresh = await n.hold(now);
  assert.ok(fresh && !fresh.done);
  assert.equal(fresh.retryAfterMs, 0);
  assert.deepEqual(n.state.restarts, { count: 1, dueAt: now });
});

test('a restart scheduled before the clock was set back is due at once', async () => {
  const n = node();
  n.state.restarts = { count: 7, dueAt: 10_000_000 };
  assert.equal(await n.hold(1_000), undefined);
  const held = await n.hold(10_000_000 - 500);
  assert.ok(held && !held.done);
  assert.equal(held.retryAfterMs, 500);
});

test('a node Basin killed for its storage is no death: its start once it may is at once, with no entry', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'basin-restarts-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'state.json');
  const now = 1_000_000;
  // Ran for a while after two deaths in a row, then the storage stop killed it (SIGKILL).
  await writeNodeState(file, {
    extensions: [],
    upSince: now - 5_000,
    restarts: { count: 2, dueAt: now - 6_000 },
  });
  await stoppedByBasin(file);
  const state = await readNodeState(file);
  assert.equal(state.upSince, undefined);
  assert.deepEqual(state.restarts, { count: 2, dueAt: now - 6_000 }, 'earlier deaths are kept');
  const n = node({ code: null, signal: 'SIGKILL' });
  Object.assign(n.state, state);
  assert.equal(await n.hold(now), undefined, 'started at once, no entry');
  assert.equal(n.state.restarts?.count, 2, 'no restart in a row counted');
  await stoppedByBasin(join(dir, 'none.json')); // a node without a state file: nothing to do
  assert.equal(existsSync(join(dir, 'none.json')), false);
});
