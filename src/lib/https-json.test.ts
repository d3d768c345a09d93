import assert from 'node:assert/strict';
import { createServer, type Socket } from 'node:net';
import { test } from 'node:test';
import { httpsJson } from './https-json.js';

test('a peer that takes the connection but never shakes hands is given up at the connect timeout', async (t) => {
  // A TCP listener that never answers TLS: like a host whose agent hangs,
  // and (for the client's timer) like a SYN nobody answers.
  const sockets: Socket[] = [];
  const server = createServer((s) => sockets.push(s));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.after(() => {
    for (const s of sockets) s.destroy();
    server.close();
  });
  const { port } = server.address() as { port: number };
  const started = Date.now();
  await assert.rejects(
    httpsJson(`https://127.0.0.1:${port}/`, { timeoutMs: 60_000, connectTimeoutMs: 300 }),
    /could not connect to https:\/\/127\.0\.0\.1:\d+\/ in 300 ms/,
  );
  // Given up long before the call's own timeout (a minute).
  assert.ok(Date.now() - started < 30_000);
});
