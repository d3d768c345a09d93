// A Basin on a PostgreSQL store (--store-url), administered by `basin`
// commands run as their own processes with the same --store-url, as an
// operator would: a credential the CLI issues works at the server, and one
// the CLI revokes is refused by the running server within 1 s (its read
// view hears the commit by LISTEN/NOTIFY; docs/decisions.md).

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { startBasin } from '../helpers.js';
import { startStorePostgres } from '../store-postgres.js';

const run = promisify(execFile);

test('basin on --store-url: the CLI issues and revokes credentials in the same PostgreSQL store; the server refuses a revoked key within 1 s', async (t) => {
  const pgc = await startStorePostgres(t);
  const url = await pgc.createDatabase('basin');
  const b = await startBasin(t, { env: { BASIN_STORE_URL: url } });
  const basin = async (...args: string[]) =>
    (
      await run(
        process.execPath,
        ['--import', 'tsx', 'src/cli/basin.ts', '--store-url', url, ...args],
        { cwd: process.cwd() },
      )
    ).stdout;

  // The CLI sees the server's store: the project the server bootstrapped.
  assert.match(await basin('project', 'list'), new RegExp(b.projectId));
  const issued = JSON.parse(
    await basin('--json', 'credential', 'create', '--project', b.projectId, '--name', 'ci'),
  ) as { id: string; bearer_key: string };
  const get = async () =>
    (
      await b.basin.app.inject({
        method: 'GET',
        url: `/v1/projects/${b.projectId}/services`,
        headers: { authorization: `Bearer ${issued.bearer_key}` },
      })
    ).statusCode;
  let status = await get();
  for (let i = 0; i < 40 && status !== 200; i++) status = (await sleep(25), await get());
  assert.equal(status, 200);
  // The rows are in PostgreSQL, not in a SQLite file.
  const rows = await pgc.sql('SELECT name FROM credentials WHERE id = $1', [issued.id], 'basin');
  assert.deepEqual(rows.rows, [{ name: 'ci' }]);

  assert.match(await basin('credential', 'revoke', issued.id), new RegExp(issued.id));
  await sleep(1000);
  assert.equal(await get(), 401);
});
