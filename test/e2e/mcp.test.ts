// `basin mcp` as shipped (node dist/cli/basin.js mcp), driven by the MCP
// SDK's own client over stdio, against `node dist/main.js` on the local
// driver: an agent's session (list tools, create a service, wait for it,
// query it through db_execute_query over verify-full TLS, read its logs,
// delete it), and the read-only server's tools, and its refusal of writes;
// then --http, which serves a bearer of the login's key alone.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { installation } from './basin-process.js';
import { ROOT } from '../harness/root.js';

const CLI = join(ROOT, 'dist/cli/basin.js');

async function mcpClient(t: TestContext, env: Record<string, string>, args: string[] = []) {
  const home = mkdtempSync(join(tmpdir(), 'basin-mcp-home-'));
  t.after(() => rmSync(home, { recursive: true, force: true }));
  const base = Object.fromEntries(
    Object.entries(process.env).filter(
      (e): e is [string, string] => e[1] !== undefined && !/^(BASIN_|PG)/.test(e[0]),
    ),
  );
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [CLI, 'mcp', ...args],
    cwd: ROOT,
    env: { ...base, HOME: home, XDG_CONFIG_HOME: join(home, 'config'), ...env },
    stderr: 'ignore',
  });
  const client = new Client({ name: 'basin-e2e', version: '0' });
  await client.connect(transport);
  t.after(() => client.close());
  return client;
}

type Result = Awaited<ReturnType<Client['callTool']>>;
const structured = (r: Result) => {
  assert.notEqual(r.isError, true, JSON.stringify(r.content));
  return r.structuredContent as Record<string, any>;
};
const errorText = (r: Result) => {
  assert.equal(r.isError, true);
  return (r.content as { text: string }[])[0]?.text ?? '';
};

test(
  'an agent drives a service through `basin mcp` (local driver, verify-full SQL)',
  { timeout: 300_000 },
  async (t) => {
    const inst = await installation(t);
    const b = await inst.start({ args: ['--series-interval-ms', '1000'] });
    const env = { BASIN_URL: b.url, BASIN_API_KEY: b.bearerKey, BASIN_DATA_DIR: inst.dataDir };
    const agent = await mcpClient(t, env);

    const names = (await agent.listTools()).tools.map((x) => x.name).sort();
    assert.deepEqual(names, [
      'db_execute_query',
      'service_create',
      'service_delete',
      'service_fork',
      'service_get',
      'service_list',
      'service_logs',
      'service_metrics_available_series',
      'service_metrics_series',
      'service_resize',
      'service_start',
      'service_stop',
    ]);

    const created = structured(
      await agent.callTool({ name: 'service_create', arguments: { name: 'agent', wait: true } }),
    ).service;
    assert.equal(created.status, 'READY');
    assert.equal(typeof created.initial_password, 'string');
    const id: string = created.service_id;
    const listed = structured(await agent.callTool({ name: 'service_list', arguments: {} }));
    assert.deepEqual(
      listed.services.map((s: { service_id: string }) => s.service_id),
      [id],
    );

    // Written with read_only false, read back with the defaults, capped.
    const write = structured(
      await agent.callTool({
        name: 'db_execute_query',
        arguments: {
          service_id: id,
          query: 'CREATE TABLE t AS SELECT g AS n FROM generate_series(1, 300) g',
          read_only: false,
        },
      }),
    );
    assert.equal(write.read_only, false);
    const read = structured(
      await agent.callTool({
        name: 'db_execute_query',
        arguments: { service_id: id, query: 'SELECT n FROM t ORDER BY n', max_rows: 5 },
      }),
    );
    assert.deepEqual(
      read.rows,
      [1, 2, 3, 4, 5].map((n) => ({ n })),
    );
    assert.equal(read.truncated, true);
    assert.equal(read.read_only, true);
    // The default is a read-only transaction, and one statement only.
    assert.match(
      errorText(
        await agent.callTool({
          name: 'db_execute_query',
          arguments: { service_id: id, query: 'DELETE FROM t' },
        }),
      ),
      /read-only transaction/,
    );
    // …in a session read-only at the server (tsdb_admin.read_only_connection):
    // COPY … TO PROGRAM, which a read-only transaction allows, is refused.
    assert.match(
      errorText(
        await agent.callTool({
          name: 'db_execute_query',
          arguments: { service_id: id, query: "COPY (SELECT 1) TO PROGRAM 'true'" },
        }),
      ),
      /COPY TO PROGRAM is not allowed in a read-only session/,
    );
    assert.match(
      errorText(
        await agent.callTool({
          name: 'db_execute_query',
          arguments: { service_id: id, query: 'COMMIT; DELETE FROM t' },
        }),
      ),
      /multiple commands/,
    );
    assert.match(
      errorText(
        await agent.callTool({
          name: 'db_execute_query',
          arguments: { service_id: id, query: 'SELECT pg_sleep(5)', timeout_ms: 200 },
        }),
      ),
      /statement timeout/,
    );
    const count = structured(
      await agent.callTool({
        name: 'db_execute_query',
        arguments: { service_id: id, query: 'SELECT count(*)::int AS c FROM t' },
      }),
    );
    assert.deepEqual(count.rows, [{ c: 300 }]);

    const logs = structured(
      await agent.callTool({ name: 'service_logs', arguments: { service_id: id, limit: 5 } }),
    );
    assert.ok(logs.entries.length > 0 && logs.entries.length <= 5);

    // Metrics: the series' names, then one of them with real samples (the
    // inserts above committed).
    // A series is listed once it has a sample (every 10 s): asked again until then.
    let available: string[] = [];
    for (let i = 0; i < 60 && !available.includes('basin_database_xact_commit_total'); i++) {
      if (i > 0) await new Promise((r) => setTimeout(r, 500));
      available = structured(
        await agent.callTool({
          name: 'service_metrics_available_series',
          arguments: { service_id: id },
        }),
      ).series as string[];
    }
    assert.ok(available.includes('basin_database_xact_commit_total'), available.join());
    let commits: number | null | undefined;
    for (let i = 0; i < 60 && !commits; i++) {
      const now = Date.now();
      const answer = structured(
        await agent.callTool({
          name: 'service_metrics_series',
          arguments: {
            service_id: id,
            name: 'basin_database_xact_commit_total',
            from: new Date(now - 10 * 60_000).toISOString(),
            to: new Date(now + 60_000).toISOString(),
            bucket_seconds: 60,
            fn: 'LAST',
          },
        }),
      ).series as { labels: Record<string, string>; data: { value: number | null }[] }[];
      commits = answer[0]?.data.map((d) => d.value).find((v) => v !== null);
      if (!commits) await new Promise((r) => setTimeout(r, 500));
    }
    assert.ok(commits && commits > 0, `the node's committed transactions, sampled: ${commits}`);

    // A read-only server: no write tools, and no writes through SQL, even asked.
    const reader = await mcpClient(t, env, ['--read-only']);
    assert.deepEqual((await reader.listTools()).tools.map((x) => x.name).sort(), [
      'db_execute_query',
      'service_get',
      'service_list',
      'service_logs',
      'service_metrics_available_series',
      'service_metrics_series',
    ]);
    assert.match(
      errorText(
        await reader.callTool({
          name: 'db_execute_query',
          arguments: {
            service_id: id,
            query: 'DELETE FROM t',
            read_only: false,
            password: created.initial_password,
          },
        }),
      ),
      /read-only/,
    );
    assert.equal(
      structured(await reader.callTool({ name: 'service_get', arguments: { service_id: id } }))
        .service.status,
      'READY',
    );

    const deleted = structured(
      await agent.callTool({ name: 'service_delete', arguments: { service_id: id, wait: true } }),
    );
    assert.equal(deleted.service.status, 'DELETED');
    assert.deepEqual(
      structured(await agent.callTool({ name: 'service_list', arguments: {} })).services,
      [],
    );
  },
);

test(
  '`basin mcp --http` serves the tools over Streamable HTTP to a bearer of the key alone (sim)',
  { timeout: 120_000 },
  async (t) => {
    const inst = await installation(t, { driver: 'sim', env: { BASIN_SIM_DELAY_MS: '0' } });
    const b = await inst.start();
    const home = mkdtempSync(join(tmpdir(), 'basin-mcp-home-'));
    t.after(() => rmSync(home, { recursive: true, force: true }));
    const child = spawn(process.execPath, [CLI, 'mcp', '--http', '127.0.0.1:0'], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH ?? '',
        HOME: home,
        XDG_CONFIG_HOME: join(home, 'config'),
        BASIN_URL: b.url,
        BASIN_API_KEY: b.bearerKey,
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    const exited = new Promise((done) => child.once('exit', done));
    t.after(async () => {
      child.kill('SIGTERM');
      await exited;
    });
    let stderr = '';
    const url = await new Promise<string>((found, fail) => {
      child.stderr.on('data', (chunk: Buffer) => {
        stderr += chunk.toString();
        const m = /serving on (http:\S+)/.exec(stderr);
        if (m) found(m[1] as string);
      });
      child.once('exit', () => fail(new Error(`basin mcp --http exited:\n${stderr}`)));
    });

    const refused = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer bsn_wrong' },
      body: '{}',
    });
    assert.equal(refused.status, 401);
    assert.equal(((await refused.json()) as { code: string }).code, 'UNAUTHORIZED');

    const client = new Client({ name: 'basin-e2e', version: '0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(url), {
        requestInit: { headers: { authorization: `Bearer ${b.bearerKey}` } },
      }),
    );
    t.after(() => client.close());
    assert.equal((await client.listTools()).tools.length, 12);
    const created = structured(
      await client.callTool({ name: 'service_create', arguments: { name: 'web', wait: true } }),
    ).service;
    assert.equal(created.status, 'READY');
    assert.deepEqual(
      structured(await client.callTool({ name: 'service_list', arguments: {} })).services.map(
        (s: { service_id: string }) => s.service_id,
      ),
      [created.service_id],
    );
  },
);
