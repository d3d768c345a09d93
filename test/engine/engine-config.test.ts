// The engine's options, as flags and environment (README's configuration table).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConfigError, parseConfig } from '../../src/config.js';

const parse = (argv: string[], env: Record<string, string> = {}) => parseConfig(argv, env);

test('engine options: defaults, flags, environment', () => {
  const d = parse([]);
  assert.deepEqual(
    [d.engineSlots, d.engineProjectSlots, d.drainTimeoutMs, d.operationTimeoutMs],
    [4, 2, 10_000, 120_000],
  );
  const c = parse(['--engine-slots', '9', '--drain-timeout-ms=0'], {
    BASIN_OPERATION_TIMEOUT_MS: '5000',
  });
  assert.deepEqual(
    [c.engineSlots, c.engineProjectSlots, c.drainTimeoutMs, c.operationTimeoutMs],
    [9, 4, 0, 5_000],
    'one project gets half the slots, rounded down',
  );
  assert.equal(parse(['--engine-slots', '1']).engineProjectSlots, 1, 'at least one');
  assert.equal(parse([], { BASIN_ENGINE_PROJECT_SLOTS: '4' }).engineProjectSlots, 4);
});

test('engine options: bad values say what to fix', () => {
  const bad: [string[], RegExp][] = [
    [['--engine-slots', '0'], /engineSlots must be a whole number from 1 to 256; got 0/],
    [
      ['--engine-project-slots', '5'],
      /engineProjectSlots must be a whole number from 1 to 4; got 5/,
    ],
    [['--drain-timeout-ms', '-1'], /drainTimeoutMs/],
    [['--operation-timeout-ms', '10'], /operationTimeoutMs must be a whole number from 1000/],
  ];
  for (const [argv, message] of bad) {
    assert.throws(
      () => parse(argv),
      (err: unknown) => {
        assert.ok(err instanceof ConfigError);
        assert.match(err.message, message);
        return true;
      },
    );
  }
});

test('bounded retries and waits: defaults, flags, environment, bad values', () => {
  const d = parse([]);
  assert.deepEqual([d.operationMaxAttempts, d.operationMaxWaitMs], [20, 86_400_000]);
  const c = parse(['--operation-max-attempts', '3'], { BASIN_OPERATION_MAX_WAIT_MS: '30000' });
  assert.deepEqual([c.operationMaxAttempts, c.operationMaxWaitMs], [3, 30_000]);
  assert.throws(
    () => parse(['--operation-max-attempts', '0']),
    /operationMaxAttempts must be a whole number from 1 to 1000; got 0/,
  );
  assert.throws(
    () => parse([], { BASIN_OPERATION_MAX_WAIT_MS: '10' }),
    /operationMaxWaitMs must be a whole number from 1000/,
  );
});
