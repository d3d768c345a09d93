import assert from 'node:assert/strict';
import { test } from 'node:test';
import { checkEmail, isEmail } from './email.js';

test('addresses every client parses are accepted', () => {
  for (const ok of [
    'alice@example.com',
    'admin@basin.localhost',
    'first.last+tag@mail.example.co.uk',
    "o'brien@example.org",
    'x@a-b.io',
  ]) {
    assert.ok(isEmail(ok), ok);
  }
});

test('anything else is refused with a 400 that shows the form', () => {
  for (const bad of [
    '',
    'alice',
    'alice@',
    '@example.com',
    'alice@localhost',
    'alice@example..com',
    'alice@-example.com',
    'a b@example.com',
    '"quoted"@example.com',
    'alice@[127.0.0.1]',
    '.alice@example.com',
    'alice.@example.com',
    `${'a'.repeat(65)}@example.com`,
    `a@${`${'b'.repeat(60)}.`.repeat(5)}com`,
  ]) {
    assert.equal(isEmail(bad), false, bad);
    assert.throws(
      () => checkEmail(bad),
      (e: any) => e.code === 'INVALID_REQUEST' && /alice@example\.com/.test(e.message),
    );
  }
  assert.equal(checkEmail('alice@example.com'), 'alice@example.com');
});
