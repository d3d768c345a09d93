import { test } from 'node:test';
import assert from 'node:assert/strict';
import { InvalidCursorError } from './cursor.js';
import { cursorShape, decodeCursor, encodeCursor } from './cursor.js';

const isPos = cursorShape({ t: 'string', i: 'integer' });
const b64 = (text: string): string => Buffer.from(text, 'utf8').toString('base64url');

test('a cursor round-trips and is opaque base64url text', () => {
  const text = encodeCursor({ t: 'svc1', i: 42 });
  assert.match(text, /^[A-Za-z0-9_-]+$/);
  assert.deepEqual(decodeCursor(text, isPos), { t: 'svc1', i: 42 });
});

test('negative integers and unicode strings round-trip', () => {
  const text = encodeCursor({ t: 'sérvice ✓', i: -7 });
  assert.deepEqual(decodeCursor(text, isPos), { t: 'sérvice ✓', i: -7 });
});

test('anything the codec did not produce is an InvalidCursorError', () => {
  const good = encodeCursor({ t: 'svc1', i: 42 });
  const bad = [
    '',
    'not a cursor!!',
    'abc',
    'A',
    `${good}=`,
    `${good}A`,
    `${good}.`,
    ` ${good}`,
    good.slice(0, -2),
    b64('not json'),
    b64('{"x":1}'),
    b64('{"t":"svc1","i":42}'), // no version
    b64('{"v":2,"t":"svc1","i":42}'), // another version
    b64('{"v":1,"t":"svc1","i":42,"x":1}'), // extra field
    b64('{"v":1,"t":"svc1"}'), // missing field
    b64('{"v":1,"t":7,"i":42}'), // wrong type
    b64('{"v":1,"t":"svc1","i":"42"}'),
    b64('{"v":1,"t":"svc1","i":4.5}'), // not an integer
    b64('{"v":1,"t":"svc1","i":1e300}'),
    b64('{"v":1,"t":"svc1","i":{"n":1}}'), // not flat
    b64('{"v":1, "t":"svc1","i":42}'), // whitespace: not what we produce
    b64('{"v":1,"t":"svc1","i":42} '),
    b64('[1,"svc1",42]'),
    b64('null'),
    b64('42'),
    b64(`{"v":1,"t":"${'x'.repeat(2000)}","i":1}`), // too long
  ];
  for (const text of bad) {
    assert.throws(() => decodeCursor(text, isPos), InvalidCursorError, JSON.stringify(text));
  }
});

test('encoding refuses the reserved version key and non-finite numbers', () => {
  assert.throws(() => encodeCursor({ v: 1 }), TypeError);
  assert.throws(() => encodeCursor({ i: Number.NaN }), TypeError);
  assert.throws(() => encodeCursor({ i: Number.POSITIVE_INFINITY }), TypeError);
});

test('cursorShape accepts exactly the declared keys and types', () => {
  const shape = cursorShape({ s: 'string', n: 'number', i: 'integer' });
  assert.equal(shape({ s: 'a', n: 1.5, i: 2 }), true);
  assert.equal(shape({ s: 'a', n: 1.5 }), false);
  assert.equal(shape({ s: 'a', n: 1.5, i: 2, x: 0 }), false);
  assert.equal(shape({ s: 'a', n: 1.5, i: 2.5 }), false);
  assert.equal(shape({ s: 1, n: 1.5, i: 2 }), false);
  assert.equal(shape({ s: 'a', n: '1', i: 2 }), false);
  assert.equal(shape(null), false);
  assert.equal(shape(['a', 1, 2]), false);
});
