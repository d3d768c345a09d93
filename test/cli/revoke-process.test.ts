// `basin credential revoke` run as its own process, as an operator would,
// against the data directory of a running Basin whose caches are warm: the
// key is refused at the very next request.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { issueCredential } from '../../src/commands/admin.js';
import { systemClock } from '../../src/lib/clock.js';
import { startBasin } from '../helpers.js';
import { readyService, serviceUrl } from '../api/service-helpers.js';

const run = promisify(execFile);

test('basin credential revoke in another process: the running server refuses the key at once', async (t) => {
  const b = await startBasin(t);
  const { id } = await readyService(b);
  const cred = await issueCredential(b.basin.store, systemClock, { projectId: b.projectId }, 'ci');
  const get = async () =>
    (
      await b.basin.app.inject({
        method: 'GET',
        url: serviceUrl(b, id),
        headers: { authorization: `Bearer ${cred.bearerKey}` },
      })
    ).statusCode;
  for (let i = 0; i < 5; i++) assert.equal(await get(), 200);

  const cli = await run(
    process.execPath,
    [
      '--import',
      'tsx',
      'src/cli/basin.ts',
      '--data-dir',
      b.config.dataDir,
      'credential',
      'revoke',
      cred.id,
    ],
    { cwd: process.cwd() },
  );
  assert.match(cli.stdout, new RegExp(cred.id));

  assert.equal(await get(), 401);
});
