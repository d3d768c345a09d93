import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { HttpProtocolError, ResponseParser, runLoad } from './load.js';

const response = (status: number, body: string, extra = '') =>
  `HTTP/1.1 ${status} X\r\nContent-Type: application/json\r\n${extra}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;

function parse(chunks: string[]): [number, string][] {
  const got: [number, string][] = [];
  const p = new ResponseParser((status, body) => got.push([status, body.toString('utf8')]));
  for (const c of chunks) p.push(Buffer.from(c, 'utf8'));
  return got;
}

test('the response parser splits a stream into responses, however it is chunked', () => {
  const stream =
    response(200, '{"a":"é"}') + response(401, '{"code":"UNAUTHORIZED"}') + response(200, '');
  const want: [number, string][] = [
    [200, '{"a":"é"}'],
    [401, '{"code":"UNAUTHORIZED"}'],
    [200, ''],
  ];
  assert.deepEqual(parse([stream]), want);
  const bytes = Buffer.from(stream, 'utf8');
  const got: [number, string][] = [];
  const p = new ResponseParser((status, body) => got.push([status, body.toString('utf8')]));
  for (let i = 0; i < bytes.length; i++) p.push(bytes.subarray(i, i + 1));
  assert.deepEqual(got, want);
});

test('the response parser refuses what it cannot count', () => {
  assert.throws(
    () => parse(['HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n']),
    HttpProtocolError,
  );
  assert.throws(() => parse(['HTTP/1.1 200 OK\r\nX: y\r\n\r\n']), HttpProtocolError);
  assert.throws(() => parse(['SSH-2.0\r\n\r\n']), HttpProtocolError);
});

test('runLoad counts responses and reports non-200 answers', async (t) => {
  let seen = 0;
  const server = createServer((req, res) => {
    seen++;
    const ok = req.headers.authorization === 'Bearer k';
    const body = ok ? '{"service_id":"s"}' : '{"code":"UNAUTHORIZED"}';
    res.writeHead(ok ? 200 : 401, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(body),
    });
    res.end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => server.close());
  const port = (server.address() as AddressInfo).port;
  const base = { host: '127.0.0.1', port, path: '/x', connections: 4, warmupMs: 50 };

  const ok = await runLoad({ ...base, durationMs: 200, headers: { Authorization: 'Bearer k' } });
  assert.ok(ok.requests > 0 && ok.requests < seen, `${ok.requests} of ${seen}`);
  assert.equal(ok.non200.size, 0);
  assert.equal(ok.sampleBody, '{"service_id":"s"}');
  assert.ok(ok.latencyMs.p50 > 0 && ok.latencyMs.p50 <= ok.latencyMs.p99);

  const bad = await runLoad({ ...base, durationMs: 100, headers: {} });
  assert.ok((bad.non200.get(401) ?? 0) > 0);
  assert.equal(bad.sampleBody, undefined);
  server.closeAllConnections();
});
