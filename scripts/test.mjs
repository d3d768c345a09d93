// Runs every test file with Node's test runner and tsx. Node 20's runner does
// not expand ** globs itself, so the files are found here.
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

function find(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return find(path);
    return path.endsWith('.test.ts') ? [path] : [];
  });
}

const only = process.argv.slice(2);
const files = only.length > 0 ? only : [...find('src'), ...find('test'), ...find('bench')].sort();
const res = spawnSync(
  process.execPath,
  ['--import', 'tsx', '--test', '--test-concurrency=2', '--test-reporter=spec', ...files],
  { stdio: 'inherit' },
);
process.exit(res.status ?? 1);
