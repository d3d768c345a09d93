// The README's example of a user's own test suite (Basin on the sim driver,
// driven through basin/client) is run as it is written, with node --test:
// only its port is changed, to one of this test's block. It sits in a
// directory inside the package, so `basin/client` resolves to this
// package's dist/ as it would to an installed one.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { claimPortBlock } from '../harness/port-block.js';
import { ROOT } from '../harness/root.js';

/** The code block that follows `<!-- example: <name> -->` in the README. */
function readmeExample(name: string): string {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const m = new RegExp(`<!-- example: ${name} -->\\s*\`\`\`js\\n([\\s\\S]*?)\`\`\``).exec(readme);
  assert.ok(m, `README.md has the example "${name}"`);
  return m[1] as string;
}

test(
  'the README example of a test suite on the sim driver passes as written',
  { timeout: 120_000 },
  async (t) => {
    assert.ok(existsSync(join(ROOT, 'dist/client/index.js')), 'npm run build first');
    const ports = await claimPortBlock();
    t.after(() => ports.release());
    const code = readmeExample('sim test suite');
    assert.match(code, /const PORT = 18080;/);
    const dir = mkdtempSync(join(ROOT, '.readme-example-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const file = join(dir, 'basin.test.mjs');
    writeFileSync(file, code.replace('const PORT = 18080;', `const PORT = ${ports.apiPort};`));
    const env = Object.fromEntries(
      // Not this runner's context either: the example is a test run of its own.
      Object.entries(process.env).filter(
        ([k]) => !k.startsWith('BASIN_') && k !== 'NODE_TEST_CONTEXT',
      ),
    );
    const run = await promisify(execFile)(
      process.execPath,
      ['--test', '--test-reporter=spec', file],
      {
        cwd: dir,
        env,
      },
    ).catch((err: { stdout: string; stderr: string }) => err);
    assert.match(run.stdout, /✔ my app gets a PostgreSQL service/, `${run.stdout}\n${run.stderr}`);
    assert.match(run.stdout, /ℹ pass 1\nℹ fail 0/);
  },
);
