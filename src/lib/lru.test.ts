import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Lru } from './lru.js';

test('an Lru never holds more than its max', () => {
  const lru = new Lru<number, number>(10);
  for (let i = 0; i < 1000; i++) {
    lru.set(i, i);
    assert.ok(lru.size <= 10, `size ${lru.size} after ${i + 1} insertions`);
  }
  assert.equal(lru.get(999), 999, 'the newest is kept');
  assert.equal(lru.get(0), undefined, 'the oldest is gone');
});

test('an Lru keeps what is used and drops what is not', () => {
  const lru = new Lru<string, number>(8);
  lru.set('hot', 1);
  for (let i = 0; i < 100; i++) {
    lru.set(`cold${i}`, i);
    assert.equal(lru.get('hot'), 1, `hot survives insertion ${i}`);
  }
  assert.equal(lru.get('cold0'), undefined);
  assert.equal(lru.get('cold99'), 99);
});

test('an Lru replaces values and empties on clear', () => {
  const lru = new Lru<string, number>(4);
  lru.set('a', 1);
  lru.set('a', 2);
  assert.equal(lru.get('a'), 2);
  assert.equal(lru.size, 1);
  for (const k of ['b', 'c', 'd']) lru.set(k, 0);
  lru.set('a', 3); // 'a' is in the old generation now: moved back, not duplicated
  assert.equal(lru.get('a'), 3);
  assert.ok(lru.size <= 4);
  lru.clear();
  assert.equal(lru.size, 0);
  assert.equal(lru.get('a'), undefined);
  assert.throws(() => new Lru(1));
});
