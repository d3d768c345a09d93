// The waker, with real sockets on loopback: one wake for every client that
// arrives meanwhile, each client's bytes spliced to the server untouched
// and back, a client outside the service's rules refused before anything
// wakes, and a wake that fails answered with an error libpq shows.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { connect, createServer, type AddressInfo, type Server } from 'node:net';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { silentLogger } from '../../../lib/logger.js';
import { Waker } from './waker.js';

/** A server that answers every chunk with `echo:` and the chunk. */
async function echoServer(): Promise<{ server: Server; port: number }> {
  const server = createServer((s) =>
    s.on('data', (d) => s.write(Buffer.concat([Buffer.from('echo:'), d]))),
  );
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, port: (server.address() as AddressInfo).port };
}

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as AddressInfo;
  await new Promise((r) => s.close(r));
  return port;
}

/** Sends `bytes`, resolves with what comes back before the other side closes or `ms` pass. */
function exchange(port: number, bytes: Buffer, ms = 3_000): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const got: Buffer[] = [];
    const s = connect({ host: '127.0.0.1', port }, () => s.write(bytes));
    s.on('data', (d) => {
      got.push(d);
      if (Buffer.concat(got).length >= bytes.length + 5) s.end();
    });
    s.on('error', reject);
    s.on('close', () => resolve(Buffer.concat(got)));
    setTimeout(() => s.destroy(), ms).unref();
  });
}

test('clients that arrive while it sleeps wake it once, and are spliced byte for byte', async (t) => {
  const { server, port: serverPort } = await echoServer();
  t.after(() => server.close());
  const port = await freePort();
  let wakes = 0;
  const waker = new Waker({
    serviceId: 'svc1',
    listen: { host: '127.0.0.1', port },
    server: { host: '127.0.0.1', port: serverPort },
    admits: () => true,
    wake: async () => {
      wakes++;
      await new Promise((r) => setTimeout(r, 200));
    },
    log: silentLogger,
  });
  await waker.arm();
  t.after(() => waker.close(true));
  // An SSLRequest's bytes, and arbitrary binary ones: untouched either way.
  const ssl = Buffer.from([0, 0, 0, 8, 4, 210, 22, 47]);
  const binary = Buffer.from([0, 255, 1, 254, 10, 13, 0]);
  const answers = await Promise.all([
    exchange(port, ssl),
    exchange(port, binary),
    exchange(port, ssl),
  ]);
  assert.equal(wakes, 1);
  assert.deepEqual(answers[0], Buffer.concat([Buffer.from('echo:'), ssl]));
  assert.deepEqual(answers[1], Buffer.concat([Buffer.from('echo:'), binary]));
  // Awake: the next client goes straight through, with no wake.
  assert.deepEqual(await exchange(port, binary), Buffer.concat([Buffer.from('echo:'), binary]));
  assert.equal(wakes, 1);
});

test("a client the service's rules do not admit is refused, and nothing wakes", async (t) => {
  const port = await freePort();
  let wakes = 0;
  const waker = new Waker({
    serviceId: 'svc1',
    listen: { host: '127.0.0.1', port },
    server: { host: '127.0.0.1', port: 1 },
    admits: () => false,
    wake: async () => {
      wakes++;
    },
    log: silentLogger,
  });
  await waker.arm();
  t.after(() => waker.close(true));
  const said = await exchange(port, Buffer.from([0, 0, 0, 8, 4, 210, 22, 47]));
  assert.equal(said.subarray(0, 1).toString(), 'E');
  assert.match(said.toString(), /C28000\0Mno access from 127\.0\.0\.1/);
  assert.equal(wakes, 0);
});

test('a wake that fails is an error to the client, not a hang; the next client tries again', async (t) => {
  const port = await freePort();
  let wakes = 0;
  const waker = new Waker({
    serviceId: 'svc1',
    listen: { host: '127.0.0.1', port },
    server: { host: '127.0.0.1', port: 1 },
    admits: () => true,
    wake: async () => {
      wakes++;
      throw new Error('PostgreSQL did not start');
    },
    log: silentLogger,
  });
  await waker.arm();
  t.after(() => waker.close(true));
  const psqlSays = (sslmode: string) =>
    promisify(execFile)(
      'psql',
      [
        `host=127.0.0.1 port=${port} user=x dbname=x sslmode=${sslmode} connect_timeout=5`,
        '-XAtc',
        'SELECT 1',
      ],
      { env: { PATH: process.env.PATH ?? '', PGPASSWORD: 'x' } },
    ).then(
      () => '',
      (err: { stderr?: string }) => err.stderr ?? '',
    );
  // Before TLS, libpq no longer shows a server's words (it could be anyone's):
  // it says that an error came, and fails at once.
  assert.match(await psqlSays('require'), /server sent an error response during SSL exchange/);
  // Without TLS, the words themselves.
  assert.match(
    await psqlSays('disable'),
    /basin: the service could not be woken: PostgreSQL did not start/,
  );
  assert.equal(wakes, 2);
});
