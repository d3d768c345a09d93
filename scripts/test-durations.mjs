// A node --test reporter that writes how long each test file took, from the
// start of its process to its end (imports, hooks and clean-up included),
// longest first, as JSON: `{ "test/e2e/forks.test.ts": 61234, … }` in
// milliseconds. scripts/test.mjs gives it a file to write.

import { relative } from 'node:path';

export default async function* durations(source) {
  const perFile = new Map();
  for await (const event of source) {
    const { name, file, nesting, details } = event.data ?? {};
    // A file is a test of its own, named after its path, at the top.
    if (event.type !== 'test:complete' || nesting !== 0 || file === undefined || name !== file) {
      continue;
    }
    perFile.set(relative(process.cwd(), file), Math.round(details?.duration_ms ?? 0));
  }
  const sorted = [...perFile].sort((a, b) => b[1] - a[1]);
  yield JSON.stringify(Object.fromEntries(sorted), null, 2) + '\n';
}
