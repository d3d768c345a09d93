// No import cycles (docs/architecture.md §1) is part of `npm run check`:
// dependency-cruiser, with the project's own .dependency-cruiser.mjs, refuses
// a cycle. These tests prove it does: on modules made for the purpose, a
// cycle of values and a cycle of types alone are refused, with the rule's
// message, while one inside the local driver (excepted until it is moved
// into rooms) is not; and the repository itself has none.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { test } from 'node:test';

const root = join(import.meta.dirname, '..', '..');
const config = join(root, '.dependency-cruiser.mjs');
const depcruise = join(root, 'node_modules', '.bin', 'depcruise');

function cruise(cwd: string, paths: string[]): { status: number | null; output: string } {
  const res = spawnSync(depcruise, [...paths, '--config', config, '--output-type', 'err-long'], {
    cwd,
    encoding: 'utf8',
  });
  return { status: res.status, output: `${res.stdout}${res.stderr}` };
}

function project(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'basin-cycles-'));
  const all = {
    'tsconfig.json': JSON.stringify({
      compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext' },
    }),
    ...files,
  };
  for (const [path, text] of Object.entries(all)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  return dir;
}

test('a cycle of imports is refused, types alone included, the local driver excepted', (t) => {
  const dir = project({
    'src/engine/a.ts': "import { b } from './b.js';\nexport const a = () => b;\n",
    'src/engine/b.ts': "import { a } from './a.js';\nexport const b = () => a;\n",
    'src/domain/c.ts': "import type { D } from './d.js';\nexport interface C { d?: D }\n",
    'src/domain/d.ts': "import type { C } from './c.js';\nexport interface D { c?: C }\n",
    'src/drivers/local/e.ts': "import { f } from './f.js';\nexport const e = () => f;\n",
    'src/drivers/local/f.ts': "import { e } from './e.js';\nexport const f = () => e;\n",
    'src/lib/g.ts': 'export const g = 1;\n',
  });
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const { status, output } = cruise(dir, ['src']);
  assert.notEqual(status, 0, output);
  assert.match(output, /no-circular: src\/engine\/a\.ts/);
  assert.match(output, /no-circular: src\/domain\/c\.ts/);
  assert.match(output, /closes a cycle/);
  assert.doesNotMatch(output, /drivers\/local/);
});

test('modules without a cycle pass', (t) => {
  const dir = project({
    'src/engine/a.ts': "import { g } from '../lib/g.js';\nexport const a = () => g;\n",
    'src/lib/g.ts': 'export const g = 1;\n',
  });
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const { status, output } = cruise(dir, ['src']);
  assert.equal(status, 0, output);
});

test('the repository has no import cycle outside the local driver', () => {
  const { status, output } = cruise(root, ['src', 'bench', 'test']);
  assert.equal(status, 0, output);
});
