// The type check is part of `npm run check`, and of the suite: `npm run
// build` only transpiles (scripts/build.mjs), so that the README's first
// command is quick, and CI runs the suite, not the check. A type error
// anywhere in src/, test/, bench/ or scripts/ fails this test, with tsc's
// own messages.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import { ROOT } from '../harness/root.js';

test('the project type-checks (tsc --noEmit, tsconfig.json)', { timeout: 600_000 }, () => {
  const tsc = spawnSync(
    join(ROOT, 'node_modules', '.bin', 'tsc'),
    ['--noEmit', '-p', 'tsconfig.json'],
    {
      cwd: ROOT,
      encoding: 'utf8',
    },
  );
  assert.equal(tsc.status, 0, `${tsc.stdout}${tsc.stderr}`);
});
