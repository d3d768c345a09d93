// The repository's root, wherever a test file runs from. scripts/test.mjs
// runs a JavaScript copy of src/, test/, bench/ and scripts/ (scripts/test-js.mjs), not
// the TypeScript under tsx; the copy's package.json is a link to the real
// one, so what the copy does not hold (dist/, scripts/, README.md,
// openapi.json, the real sources the lint tests read) is found in the
// checkout either way.

import { realpathSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = dirname(
  realpathSync(fileURLToPath(new URL('../../package.json', import.meta.url))),
);
