import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CommandError, failureOf, run } from './exec.js';

const failure = (args: string[]) =>
  run('sh', args).then(
    () => assert.fail('it should have failed'),
    (err: unknown) => err,
  );

test('a failed command: its last lines and how it ended, its output on stdout apart, never its command line', async () => {
  const exited = await failure(['-c', 'echo found; echo oops >&2; exit 3']);
  assert.ok(exited instanceof CommandError);
  assert.equal(exited.ending, 'exit 3');
  assert.equal(exited.stdout, 'found\n');
  assert.equal(failureOf(exited), 'oops | found (exit 3)');
  // Killed: no error of its own, how it ended says it.
  const killed = await failure(['-c', 'kill -9 $$']);
  assert.equal(failureOf(killed), 'killed by SIGKILL');
  assert.doesNotMatch(failureOf(killed), /sh -c/);
  assert.equal(failureOf(new Error('plain')), 'plain');
});
