import { test } from 'node:test';
import assert from 'node:assert/strict';
import { dropCutEscape, parseJsonlogLine, parseJsonlogPrefix } from './jsonlog.js';

const TIME = '2026-11-22 02:00:13.241 UTC';
const TIME_MS = Date.parse('2026-11-22T02:00:13.241Z');

/** A line as PostgreSQL writes it: timestamp first, the long fields after the message. */
function pgLine(message: string, statement: string): string {
  return JSON.stringify({
    timestamp: TIME,
    user: 'tsdbadmin',
    pid: 4242,
    session_start: '2026-11-22 02:00:00 UTC',
    txid: 0,
    error_severity: 'ERROR',
    state_code: '22P02',
    message,
    statement,
    backend_type: 'client backend',
    query_id: -1234,
  });
}

test('a line cut after its message is an entry with the whole message', () => {
  const line = pgLine('invalid input syntax for type integer: "x"', 's'.repeat(1000));
  const cutAt = line.indexOf('"statement"') + 30;
  assert.deepEqual(parseJsonlogPrefix(line.slice(0, cutAt), line.length - cutAt), {
    timeMs: TIME_MS,
    severity: 'ERROR',
    message: 'invalid input syntax for type integer: "x"',
  });
});

test('a line cut inside its message keeps what was read of it, and how much was not', () => {
  const message = 'a "quoted" \\ path\nnext line €😀 '.repeat(10);
  const line = pgLine(message, 'select 1');
  const start = line.indexOf('"message":"') + '"message":"'.length;
  // Every cut inside the message: escapes and surrogate pairs split anywhere.
  for (let cutAt = start; cutAt < line.indexOf('","statement"'); cutAt++) {
    const rec = parseJsonlogPrefix(line.slice(0, cutAt), line.length - cutAt);
    assert.ok(rec, `cut at ${cutAt}`);
    assert.equal(rec.cut, line.length - cutAt);
    assert.equal(rec.severity, 'ERROR');
    const kept = rec.message.replace(/[\ud800-\udbff]$/, ''); // half a pair at the cut
    assert.ok(message.startsWith(kept), `cut at ${cutAt}: ${JSON.stringify(rec.message)}`);
    assert.ok(message.length - kept.length <= line.length - cutAt);
  }
});

test('a line cut before its severity, or not jsonlog, is no entry', () => {
  const line = pgLine('m', 's');
  const beforeSeverity = line.indexOf('"error_severity"') + 5;
  assert.equal(parseJsonlogPrefix(line.slice(0, beforeSeverity), 10), undefined);
  for (const garbage of [
    '',
    'x'.repeat(100),
    '{"timestamp":1,',
    '{{{{',
    '["timestamp"',
    '{"a" "b"}',
  ]) {
    assert.equal(parseJsonlogPrefix(garbage, 10), undefined, garbage);
  }
  // Cut after the severity, before the message: an entry whose message is unknown.
  const afterSeverity = line.indexOf('"state_code"');
  assert.deepEqual(parseJsonlogPrefix(line.slice(0, afterSeverity), 7), {
    timeMs: TIME_MS,
    severity: 'ERROR',
    message: '',
    cut: 7,
  });
  // A whole line read as a prefix is the same record as parsed whole.
  assert.deepEqual(parseJsonlogPrefix(line, 0), parseJsonlogLine(line));
});

test('an escape cut in two is dropped; an escaped backslash is kept', () => {
  assert.equal(dropCutEscape('abc\\'), 'abc');
  assert.equal(dropCutEscape('abc\\\\'), 'abc\\\\');
  assert.equal(dropCutEscape('abc\\u00'), 'abc');
  assert.equal(dropCutEscape('abc\\\\u00'), 'abc\\\\u00');
  assert.equal(dropCutEscape('abc\\\\\\u0'), 'abc\\\\');
  assert.equal(dropCutEscape('abc\\n'), 'abc\\n');
});
