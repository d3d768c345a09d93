// Runs every test file (or the files named) with Node's test runner and tsx:
// `node scripts/test.mjs [--test-name-pattern=<re>…] [--test-only] [files…]`.
// Node 20's runner does not expand ** globs itself, so the files are found
// here.
//
// How the suite fits in its time (docs/architecture.md §6): every file runs
// in a process of its own, and files run side by side, TEST_CONCURRENCY at
// once (CONCURRENCY by default). Most of an end-to-end file's time is spent
// waiting on processes (initdb, PostgreSQL starting, a backup), not on a
// CPU, so more files run at once than the machine has cores. And the
// longest files start first, so that the many short ones fill in beside
// them at the end (a long file started last would run alone after all the
// others): `node --test` sorts its files by name, so the runner is driven
// through its API (`run()`), which keeps the order it is given. How long a
// file takes comes from the last run on this machine (.test-durations.json,
// written after every run, not committed), else from test/durations.json (a
// full run's record, committed for fresh clones); a file in neither counts
// as long as the median of its folder's files (a file in a folder nobody
// has timed, as the longest), so a new end-to-end file starts among the
// end-to-end ones, in parallel with the rest, with nothing to declare.

import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { run } from 'node:test';
import { spec } from 'node:test/reporters';

/**
 * Files at once (README, "Development"): 2, what CI's 2-core machine is
 * known to pass with. 3 took 2 minutes less on the quiet machine (its cores
 * two-thirds busy), but the several-processes kill test failed there in two
 * of three full runs (docs/decisions.md, Several processes): not before that
 * is understood.
 */
const CONCURRENCY = 2;
const RECORD = '.test-durations.json';
const BASELINE = 'test/durations.json';

// The test files are TypeScript: the runner's children inherit its node
// flags, so the runner itself runs with tsx.
if (!process.execArgv.some((a, i) => a === 'tsx' && process.execArgv[i - 1] === '--import')) {
  const res = spawnSync(
    process.execPath,
    ['--import', 'tsx', ...process.execArgv, import.meta.filename, ...process.argv.slice(2)],
    { stdio: 'inherit' },
  );
  process.exit(res.status ?? 1);
}

function find(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return find(path);
    return path.endsWith('.test.ts') ? [path] : [];
  });
}

function readDurations(path) {
  try {
    return JSON.parse(readFileSync(path, 'utf8'));
  } catch {
    return {};
  }
}

/** Longest first, by the record, the baseline, or the median of the file's folder (else first). */
function longestFirst(files, known) {
  const byFolder = new Map();
  for (const [file, ms] of Object.entries(known)) {
    byFolder.set(dirname(file), [...(byFolder.get(dirname(file)) ?? []), ms]);
  }
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  // A folder nobody has timed yet (a new kind of test) starts first: a short
  // file started early costs nothing, a long one started last the whole tail.
  const expected = (file) =>
    known[file] ?? median(byFolder.get(dirname(file)) ?? []) ?? Number.MAX_SAFE_INTEGER;
  return [...files].sort((a, b) => expected(b) - expected(a) || a.localeCompare(b));
}

function usage(message) {
  console.error(
    `${message}\nusage: node scripts/test.mjs [--test-name-pattern=<regexp>…] [--test-only] [files…]`,
  );
  process.exit(2);
}

const args = process.argv.slice(2);
const testNamePatterns = [];
let only = false;
for (const arg of args.filter((a) => a.startsWith('-'))) {
  if (arg.startsWith('--test-name-pattern='))
    testNamePatterns.push(arg.split('=').slice(1).join('='));
  else if (arg === '--test-only') only = true;
  else usage(`unknown option ${arg}`);
}
const named = args.filter((a) => !a.startsWith('-')).map((f) => relative('.', resolve(f)));
const files = named.length > 0 ? named : [...find('src'), ...find('test'), ...find('bench')];
const concurrency = Number(process.env.TEST_CONCURRENCY ?? CONCURRENCY);
if (!Number.isInteger(concurrency) || concurrency < 1) {
  usage(`TEST_CONCURRENCY must be a whole number of files, at least 1 (not ${concurrency})`);
}

// One PostgreSQL template for every end-to-end installation of the run,
// copied into each (test/harness/shared-template.ts): a hundred initdbs less.
// (Imported here, not above: this file first runs without tsx, to restart itself with it.)
const shared = await import('../test/harness/shared-template.ts');
const template = files.some((f) => f.startsWith(join('test', 'e2e')))
  ? await shared.buildSharedTemplate()
  : undefined;
if (template) {
  process.env[shared.SHARED_TEMPLATE_ENV] = template.dir;
  process.once('exit', () => template.remove());
}

const known = { ...readDurations(BASELINE), ...readDurations(RECORD) };
const stream = run({
  files: longestFirst(files, known).map((f) => resolve(f)),
  concurrency,
  only,
  ...(testNamePatterns.length > 0 ? { testNamePatterns } : {}),
});
// A file is a test of its own at the top, named after its path: its
// duration runs from its process's start to its end.
const measured = {};
stream.on('test:complete', ({ name, file, nesting, details }) => {
  if (nesting === 0 && file !== undefined && name === file) {
    measured[relative('.', file)] = Math.round(details?.duration_ms ?? 0);
  }
});
stream.on('test:fail', ({ todo }) => {
  if (!todo) process.exitCode = 1;
});
stream.once('end', () => {
  // This run's durations over the last record's (a run of some files updates theirs).
  const merged = { ...readDurations(RECORD), ...measured };
  const sorted = Object.entries(merged).sort((a, b) => b[1] - a[1]);
  writeFileSync(`${RECORD}.tmp`, JSON.stringify(Object.fromEntries(sorted), null, 2) + '\n');
  renameSync(`${RECORD}.tmp`, RECORD);
});
stream.compose(spec).pipe(process.stdout);
