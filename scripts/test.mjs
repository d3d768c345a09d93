// Runs every test file (or the files named) with Node's test runner and tsx.
// Node 20's runner does not expand ** globs itself, so the files are found
// here.
//
// How the suite fits in its time (docs/architecture.md §6): every file runs
// in a process of its own, and files run side by side, TEST_CONCURRENCY at
// once (CONCURRENCY by default). Most of an end-to-end file's time is spent
// waiting on processes (initdb, PostgreSQL starting, a backup), not on a
// CPU, so more files run at once than the machine has cores. The runner
// starts files in the order it is given them, so the longest start first
// and the many short ones fill in beside them at the end (the longest last
// would run alone after everything else). How long a file takes comes from
// the last run on this machine (.test-durations.json, written by
// scripts/test-durations.mjs after every run, not committed), else from
// test/durations.json (a full run's record, committed for fresh clones); a
// file in neither is taken as long as the median of its folder's files, so
// a new end-to-end file starts among the end-to-end ones, in parallel with
// the rest, with nothing to declare.

import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, renameSync, rmSync, statSync } from 'node:fs';
import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

/** Files at once: measured on the 2-core machine (README, "Tests"). */
const CONCURRENCY = 6;
const RECORD = '.test-durations.json';
const BASELINE = 'test/durations.json';

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

/** Longest first, by the record, the baseline, or the median of the file's folder. */
function longestFirst(files, known) {
  const byFolder = new Map();
  for (const [file, ms] of Object.entries(known)) {
    const folder = dirname(file);
    byFolder.set(folder, [...(byFolder.get(folder) ?? []), ms]);
  }
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;
  const expected = (file) => known[file] ?? median(byFolder.get(dirname(file)) ?? []);
  return [...files].sort((a, b) => expected(b) - expected(a) || a.localeCompare(b));
}

const only = process.argv.slice(2);
const files = only.length > 0 ? only : [...find('src'), ...find('test'), ...find('bench')];
const known = { ...readDurations(BASELINE), ...readDurations(RECORD) };
const concurrency = Number(process.env.TEST_CONCURRENCY ?? CONCURRENCY);
if (!Number.isInteger(concurrency) || concurrency < 1) {
  console.error(`TEST_CONCURRENCY must be a whole number of files, at least 1 (not ${concurrency})`);
  process.exit(2);
}
const measured = `${RECORD}.new`;
const res = spawnSync(
  process.execPath,
  [
    '--import',
    'tsx',
    '--test',
    `--test-concurrency=${concurrency}`,
    ...['--test-reporter=spec', '--test-reporter-destination=stdout'],
    ...['--test-reporter=./scripts/test-durations.mjs', `--test-reporter-destination=${measured}`],
    ...longestFirst(files, known),
  ],
  { stdio: 'inherit' },
);
// This run's durations over the last record's (a run of some files updates theirs).
if (existsSync(measured)) {
  const merged = { ...readDurations(RECORD), ...readDurations(measured) };
  const sorted = Object.entries(merged).sort((a, b) => b[1] - a[1]);
  writeFileSync(`${RECORD}.tmp`, JSON.stringify(Object.fromEntries(sorted), null, 2) + '\n');
  renameSync(`${RECORD}.tmp`, RECORD);
  rmSync(measured, { force: true });
}
process.exit(res.status ?? 1);
