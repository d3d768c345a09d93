// No import cycles (docs/architecture.md §1) is part of `npm run check`:
// dependency-cruiser, with the project's own .dependency-cruiser.mjs, refuses
// a cycle. These tests prove it does: on modules made for the purpose, a
// cycle of values and a cycle of types alone are refused, with the rule's
// message, inside the local driver as anywhere else (it had an exception
// until it was moved into rooms); the local driver's host side importing
// its service side is refused too (docs/architecture.md §9), and so is a
// benchmark importing the local driver (it goes through
// test/harness/installation-paths.ts); and the repository itself has none
// of these.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { ROOT } from '../harness/root.js';

const root = ROOT;
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

test('a cycle of imports is refused, types alone included, the local driver too', (t) => {
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
  assert.match(output, /no-circular: src\/drivers\/local\/e\.ts/);
});

test("the local driver's host side imports nothing of its service side", (t) => {
  const dir = project({
    'src/drivers/local/node/n.ts':
      "import { c } from '../converge/c.js';\nexport const n = () => c;\n",
    'src/drivers/local/host/h.ts':
      "import type { DriverContext } from '../context.js';\nexport type H = DriverContext;\n",
    'src/drivers/local/converge/c.ts': 'export const c = 1;\n',
    'src/drivers/local/context.ts': 'export interface DriverContext { x: number }\n',
    'src/drivers/local/replication/r.ts':
      "import { h } from '../host/ok.js';\nexport const r = () => h;\n",
    'src/drivers/local/host/ok.ts': 'export const h = 1;\n',
  });
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const { status, output } = cruise(dir, ['src']);
  assert.notEqual(status, 0, output);
  assert.match(output, /host-side-decides-nothing: src\/drivers\/local\/node\/n\.ts/);
  assert.match(output, /host-side-decides-nothing: src\/drivers\/local\/host\/h\.ts/);
  assert.doesNotMatch(output, /replication\/r\.ts/);
});

test('a benchmark imports nothing of the local driver; the harness may', (t) => {
  const dir = project({
    'bench/b.ts': "import { l } from '../src/drivers/local/l.js';\nexport const b = () => l;\n",
    'bench/ok.ts': "import { p } from '../test/harness/p.js';\nexport const ok = () => p;\n",
    'test/harness/p.ts': "import { l } from '../../src/drivers/local/l.js';\nexport const p = l;\n",
    'src/drivers/local/l.ts': 'export const l = 1;\n',
  });
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const { status, output } = cruise(dir, ['bench', 'test']);
  assert.notEqual(status, 0, output);
  assert.match(output, /bench-through-harness: bench\/b\.ts/);
  assert.doesNotMatch(output, /bench\/ok\.ts|test\/harness\/p\.ts/);
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

test('the repository has no import cycle', () => {
  const { status, output } = cruise(root, ['src', 'bench', 'test']);
  assert.equal(status, 0, output);
});
