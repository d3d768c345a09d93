// The layer rules of docs/architecture.md §1 are part of `npm run check`: an import
// across a layer boundary fails the linter. Each case lints one line as if
// it were in a file of that layer, with the project's own eslint.config.js.

import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { ESLint } from 'eslint';
import { ROOT } from '../harness/root.js';

const root = ROOT;
const eslint = new ESLint({ cwd: root });

async function layerErrors(file: string, from: string, dynamic = false): Promise<string[]> {
  // A module loaded when first needed (docs/architecture.md §6) obeys the same rules.
  const text = dynamic
    ? `export const x = async () => (await import('${from}')).x;\n`
    : `import { x } from '${from}';\nexport { x };\n`;
  const [result] = await eslint.lintText(text, { filePath: join(root, file) });
  const rule = dynamic ? 'layers/no-restricted-dynamic-imports' : 'no-restricted-imports';
  return (result?.messages ?? []).filter((m) => m.ruleId === rule).map((m) => m.message);
}

const VIOLATIONS: [string, string][] = [
  ['src/lib/x.ts', '../drivers/driver.js'],
  ['src/lib/x.ts', '../domain/types.js'],
  ['src/domain/x.ts', '../store/store.js'],
  ['src/domain/x.ts', 'node:fs'],
  ['src/api/routes/x.ts', '../../drivers/driver.js'],
  ['src/api/routes/x.ts', '../../engine/engine.js'],
  ['src/api/x.ts', '../store/sqlite/sqlite-store.js'],
  ['src/commands/x.ts', '../drivers/driver.js'],
  ['src/commands/x.ts', '../api/errors.js'],
  ['src/commands/x.ts', '../engine/engine.js'],
  ['src/engine/x.ts', '../commands/context.js'],
  ['src/engine/x.ts', '../drivers/local/local-driver.js'],
  ['src/engine/x.ts', '../store/sqlite/repos.js'],
  ['src/drivers/local/x.ts', '../../engine/engine.js'],
  ['src/drivers/local/logs/x.ts', '../../../store/store.js'],
  ['src/drivers/local/x.ts', '../sim/sim-driver.js'],
  ['src/drivers/sim/x.ts', '../local/layout.js'],
  ['src/store/sqlite/x.ts', '../../commands/context.js'],
  ['src/store/x.ts', '../basin.js'],
  ['src/commands/x.ts', '../open-store.js'],
  ['src/client/x.ts', '../domain/errors.js'],
  ['src/client/x.ts', '../api/schemas/service.js'],
  ['src/client/x.ts', 'node:fs'],
  ['src/cli/x.ts', '../api/routes/services.js'],
  ['src/cli/x.ts', '../engine/engine.js'],
  ['src/cli/x.ts', '../drivers/local/layout.js'],
  ['src/cli/x.ts', '../store/sqlite/sqlite-store.js'],
  ['src/cli/x.ts', '../basin.js'],
  ['src/hosts/x.ts', '../agent/join.js'],
  ['src/hosts/x.ts', '../store/sqlite/repos.js'],
  ['src/agent/x.ts', '../store/store.js'],
  ['src/agent/x.ts', '../hosts/installation-ca.js'],
  ['src/agent/x.ts', '../basin.js'],
  ['src/drivers/hosts/x.ts', '../local/layout.js'],
  ['src/drivers/hosts/x.ts', '../../store/store.js'],
];

for (const [file, from] of VIOLATIONS) {
  test(`${file} may not import ${from}`, async () => {
    for (const dynamic of [false, true]) {
      const errors = await layerErrors(file, from, dynamic);
      assert.equal(
        errors.length,
        1,
        `no layer error for ${dynamic ? 'import() of ' : ''}${from} in ${file}`,
      );
      assert.match(errors[0] as string, /Layer rule \(docs\/architecture\.md §1\)/);
    }
  });
}

const ALLOWED: [string, string][] = [
  ['src/domain/x.ts', './types.js'],
  ['src/domain/x.ts', '../lib/clock.js'],
  ['src/commands/x.ts', '../domain/types.js'],
  ['src/commands/x.ts', '../store/store.js'],
  ['src/api/routes/x.ts', '../../commands/context.js'],
  ['src/engine/x.ts', '../drivers/driver.js'],
  ['src/engine/x.ts', '../store/store.js'],
  ['src/drivers/local/x.ts', '../driver.js'],
  ['src/drivers/local/logs/x.ts', '../../../domain/logs.js'],
  ['src/basin.ts', './drivers/local/local-driver.js'],
  ['src/client/x.ts', './generated/openapi.js'],
  ['src/client/x.ts', 'openapi-fetch'],
  ['src/cli/x.ts', '../client/index.js'],
  ['src/cli/x.ts', '../commands/admin.js'],
  ['src/cli/x.ts', '../store/store.js'],
  ['src/cli/x.ts', '../open-store.js'],
  ['src/cli/x.ts', '../config.js'],
  ['src/cli/x.ts', './basin.js'],
  ['src/hosts/x.ts', '../store/store.js'],
  ['src/agent/x.ts', '../lib/x509.js'],
  ['src/cli/x.ts', '../agent/host-agent.js'],
  ['src/agent/x.ts', '../drivers/local/local-driver.js'],
  ['src/agent/x.ts', '../config.js'],
];

for (const [file, from] of ALLOWED) {
  test(`${file} may import ${from}`, async () => {
    assert.deepEqual(await layerErrors(file, from), []);
    assert.deepEqual(await layerErrors(file, from, true), []);
  });
}
