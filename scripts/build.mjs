// `npm run build`'s first part: dist/ from src/, as `npm start`, the CLI and
// the tests run it (the eBPF program and the console come after it:
// package.json).
//
// The JavaScript is esbuild's, file for file (src/x.ts → dist/x.js, with its
// source map): a second or two, where tsc took half a minute of a 2-core
// machine (its type check and its emit), too long for the README's first
// command. The tests have run src/ as esbuild's output all along
// (scripts/test-js.mjs), so nothing runs differently. The types are checked
// by `npm run check` and by the suite itself (test/lint/types.test.ts), not
// here. tsc still writes the client's declarations (package.json exports
// `./client` with its types): tsconfig.build.json, the client's files only.

import { spawnSync } from 'node:child_process';
import { readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { build } from 'esbuild';

/** The .ts files under `dir` that ship: not the tests beside them. */
function sources(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return sources(path);
    return e.name.endsWith('.ts') && !e.name.endsWith('.test.ts') ? [path] : [];
  });
}

rmSync('dist', { recursive: true, force: true });
await build({
  entryPoints: sources('src'),
  outdir: 'dist',
  outbase: 'src',
  format: 'esm',
  platform: 'node',
  target: 'node20',
  sourcemap: 'linked',
  logLevel: 'warning',
});
const tsc = spawnSync(join('node_modules', '.bin', 'tsc'), ['-p', 'tsconfig.build.json'], {
  stdio: 'inherit',
});
if (tsc.status !== 0) process.exit(tsc.status ?? 1);
