import assert from 'node:assert/strict';
import { test } from 'node:test';
import { divergence, lsnBytes, parseHistory } from './timeline.js';

test('LSNs compare as numbers of bytes, both halves in hexadecimal', () => {
  assert.equal(lsnBytes('0/0'), 0n);
  assert.equal(lsnBytes('1/0'), 1n << 32n);
  assert.ok((lsnBytes('0/5000060') as bigint) > (lsnBytes('0/500006') as bigint));
  assert.ok((lsnBytes('1/0') as bigint) > (lsnBytes('0/FFFFFFFF') as bigint));
  assert.equal(lsnBytes('nope'), undefined);
  assert.equal(lsnBytes('0/5000060; DROP'), undefined);
});

test('a history file: one entry per line, comments and junk skipped', () => {
  const text = [
    '1\t0/5000060\tno recovery target specified',
    '',
    '# a comment',
    '2\t0/7000000\tno recovery target specified',
    'garbage line',
  ].join('\n');
  assert.deepEqual(parseHistory(text), [
    { parent: 1, switchpoint: '0/5000060' },
    { parent: 2, switchpoint: '0/7000000' },
  ]);
});

const history = parseHistory('1\t0/5000060\tx\n2\t0/7000000\ty\n');

test('a standby on the primary timeline, or not past the fork, follows', () => {
  assert.equal(divergence({ timeline: 3, lsn: '0/9000000' }, 3, history), undefined);
  assert.equal(divergence({ timeline: 1, lsn: '0/5000060' }, 3, history), undefined);
  assert.equal(divergence({ timeline: 1, lsn: '0/4000000' }, 3, history), undefined);
  assert.equal(divergence({ timeline: 2, lsn: '0/6FFFFFF' }, 3, history), undefined);
});

test('a standby past the point where the primary timeline forked off its own cannot follow', () => {
  assert.match(
    divergence({ timeline: 1, lsn: '0/5000100' }, 3, history) ?? '',
    /up to 0\/5000100 on timeline 1, past 0\/5000060/,
  );
  assert.match(divergence({ timeline: 2, lsn: '0/7000001' }, 3, history) ?? '', /past 0\/7000000/);
});

test('a standby on a timeline the primary never had, or a later one, cannot follow', () => {
  assert.match(
    divergence({ timeline: 4, lsn: '0/1' }, 3, history) ?? '',
    /timeline 4, after the primary's 3/,
  );
  assert.match(
    divergence({ timeline: 2, lsn: '0/1' }, 3, parseHistory('1\t0/5000060\tx\n')) ?? '',
    /not in the history/,
  );
});
