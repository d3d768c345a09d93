import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import type { LogPage, LogQuery } from '../../src/domain/logs.js';
import { readNodeLogs } from '../../src/drivers/local/logs/read-node-logs.js';
import { startScratchPostgres } from './scratch-postgres.js';

const SCOPE = 'service:scratch000:0';

function query(over: Partial<LogQuery> = {}): LogQuery {
  return { severities: [], search: [], limit: 500, ...over };
}

/** The logging collector writes asynchronously: polls until `ok` holds. */
async function readUntil(logDir: string, q: LogQuery, ok: (page: LogPage) => boolean) {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const page = await readNodeLogs(logDir, q, SCOPE);
    if (ok(page) || Date.now() > deadline) return page;
    await sleep(50);
  }
}

test(
  "a real PostgreSQL's jsonlog: a failed query is the newest ERROR entry",
  { timeout: 60_000 },
  async () => {
    const server = await startScratchPostgres();
    try {
      const startedAt = Date.now();
      const client = new pg.Client({ host: server.socketDir, port: server.port, user: 'postgres' });
      await client.connect();
      try {
        await assert.rejects(client.query('SELECT * FROM no_such_table'), /no_such_table/);
      } finally {
        await client.end();
      }
      const missing = 'relation "no_such_table" does not exist';
      const page = await readUntil(server.logDir, query(), (p) =>
        p.entries.some((e) => e.message === missing),
      );
      const error = page.entries.find((e) => e.message === missing);
      assert.ok(error, JSON.stringify(page.entries));
      assert.equal(error.severity, 'ERROR');
      assert.match(error.timestamp, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      assert.ok(Math.abs(Date.parse(error.timestamp) - startedAt) < 60_000);
      // Newest first: the startup messages come after (older than) it.
      const times = page.entries.map((e) => Date.parse(e.timestamp));
      assert.deepEqual(
        times,
        [...times].sort((a, b) => b - a),
      );
      const ready = page.entries.findIndex((e) =>
        e.message.includes('ready to accept connections'),
      );
      assert.ok(ready > page.entries.indexOf(error), 'startup is older than the error');

      // Filters and paging work on the real file too.
      const errors = await readNodeLogs(server.logDir, query({ severities: ['ERROR'] }), SCOPE);
      assert.deepEqual(errors.entries, [error]);
      const first = await readNodeLogs(server.logDir, query({ limit: 1 }), SCOPE);
      assert.ok(first.nextCursor);
      const rest = await readNodeLogs(server.logDir, query({ cursor: first.nextCursor }), SCOPE);
      // (anything logged since `page` was read is newer: it comes first)
      const all = [...first.entries, ...rest.entries];
      assert.deepEqual(all.slice(all.length - page.entries.length), page.entries);
    } finally {
      await server.stop();
    }
  },
);
