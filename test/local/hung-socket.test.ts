// Issue 7, hole 2, at the driver: a tenant (who can run programs as its
// service's OS user, docs/security.md) moves its server's socket aside and
// listens in its place with a program that accepts connections and never
// answers, or that even completes the login and then never answers a query.
// Basin's administrative connection (a password change here) must give up
// within its bounds, with a retryable error naming what timed out, and
// succeed once the real socket is back. The driver runs with short bounds
// so that the test is quick; the defaults are in docs/decisions.md.

import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { DriverError, type ServiceSpec } from '../../src/drivers/driver.js';
import { withAdmin } from '../../src/drivers/local/node/admin.js';
import { Layout, socketName } from '../../src/drivers/local/layout.js';
import { createLocalDriver, type LocalDriver } from '../../src/drivers/local/local-driver.js';
import { scramVerifier } from '../../src/lib/secrets.js';
import {
  applyUntilDone,
  cleanUpDataDir,
  deleteUntilDone,
  makeDataDir,
  makeSpec,
  query,
  testUids,
} from './helpers.js';

/**
 * The tenant's program, run as the service's OS user: listens on the socket
 * path argv[1]; `silent` accepts and never says a word, `login` answers the
 * startup message with AuthenticationOk and ReadyForQuery and then nothing.
 */
const FAKE_SERVER = `
const net = require('node:net');
const [path, mode] = process.argv.slice(1);
net.createServer((socket) => {
  socket.on('error', () => {});
  if (mode !== 'login') return;
  let got = Buffer.alloc(0);
  let loggedIn = false;
  socket.on('data', (data) => {
    if (loggedIn) return;
    got = Buffer.concat([got, data]);
    if (got.length < 4 || got.length < got.readInt32BE(0)) return;
    loggedIn = true;
    socket.write(Buffer.from([0x52, 0, 0, 0, 8, 0, 0, 0, 0, 0x5a, 0, 0, 0, 5, 0x49]));
  });
}).listen(path, () => process.stdout.write('listening\\n'));
`;

const BOUNDS = {
  connectMs: 1_500,
  statementMs: 1_000,
  lockMs: 1_000,
  queryMs: 1_500,
  callMs: 4_000,
};

describe('a tenant whose socket never answers cannot hang the driver', () => {
  let dataDir: string;
  let driver: LocalDriver;
  let spec: ServiceSpec;
  let fake: ChildProcess | undefined;
  let socket: string;
  let owner: { uid: number; gid: number };

  /** Runs `argv` as the service's OS user, as its tsdbadmin can through COPY … TO PROGRAM. */
  const asTenant = (argv: string[]) => {
    const res = spawnSync(argv[0]!, argv.slice(1), { ...owner, stdio: 'pipe' });
    assert.equal(res.status, 0, `${argv.join(' ')}: ${res.stderr}`);
  };

  async function startFake(mode: 'silent' | 'login'): Promise<void> {
    asTenant(['mv', socket, `${socket}.real`]);
    fake = spawn(process.execPath, ['-e', FAKE_SERVER, socket, mode], {
      ...owner,
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const [line] = (await once(fake.stdout!, 'data')) as [Buffer];
    assert.equal(line.toString().trim(), 'listening');
  }

  async function restoreSocket(): Promise<void> {
    if (fake && fake.exitCode === null && fake.signalCode === null) {
      fake.kill('SIGKILL');
      await once(fake, 'exit');
    }
    fake = undefined;
    rmSync(socket, { force: true });
    asTenant(['mv', `${socket}.real`, socket]);
  }

  before(async () => {
    dataDir = makeDataDir({ sharedTemplate: true });
    driver = createLocalDriver({
      ...testUids(),
      dataDir,
      publicHost: 'db.example.test',
      adminBounds: BOUNDS,
    });
    await driver.start();
    spec = await makeSpec('POSTGRES', 'first-password-0123');
    await applyUntilDone(driver, spec);
    const layout = new Layout(dataDir);
    const ref = { id: spec.serviceId, node: 0 };
    socket = join(layout.socketDir(ref), socketName(spec.port));
    const st = statSync(layout.socketDir(ref));
    owner = { uid: st.uid, gid: st.gid };
  });

  after(async () => {
    fake?.kill('SIGKILL');
    if (spec) await deleteUntilDone(driver, spec.serviceId).catch(() => {});
    await driver.close();
    await cleanUpDataDir(dataDir);
  });

  const changed = (password: string): ServiceSpec => ({
    ...spec,
    passwordVerifier: scramVerifier(password),
  });

  /** Whether `err` is the retryable timeout of the admin connection, waiting for `what`. */
  const timedOut = (what: RegExp) => (err: unknown) => {
    assert.ok(err instanceof DriverError, String(err));
    assert.equal(err.retryable, true);
    assert.match(err.message, /timed out after [\d.]+ m?s waiting for the server on /);
    assert.match(err.message, what);
    return true;
  };

  test('the real server is told the bounds at login: a long statement is cancelled by it', async () => {
    const layout = new Layout(dataDir);
    const ref = { id: spec.serviceId, node: 0 };
    const target = {
      socketDir: layout.socketDir(ref),
      port: spec.port,
      pgdata: layout.pgdata(ref),
      bounds: BOUNDS,
    };
    const settings = await withAdmin(target, 'postgres', async (c) => {
      const { rows } = await c.query(
        "SELECT current_setting('statement_timeout') AS s, current_setting('lock_timeout') AS l",
      );
      return rows[0];
    });
    assert.deepEqual(settings, { s: '1s', l: '1s' });
    // PostgreSQL's own error, before the client's bound (queryMs) would expire.
    await assert.rejects(
      withAdmin(target, 'postgres', (c) => c.query('SELECT pg_sleep(3)')),
      /canceling statement due to statement timeout/,
    );
  });

  test('a program that accepts and never answers: the login times out', async () => {
    await startFake('silent');
    try {
      await assert.rejects(
        driver.applyService(changed('second-password-0123')),
        timedOut(/to accept a login/),
      );
    } finally {
      await restoreSocket();
    }
  });

  test('a program that lets Basin log in and never answers a query: the query times out', async () => {
    await startFake('login');
    try {
      await assert.rejects(
        driver.applyService(changed('second-password-0123')),
        timedOut(/to answer SELECT current_setting/),
      );
    } finally {
      await restoreSocket();
    }
  });

  test('with the real socket back, the password change goes through', async () => {
    const next = changed('second-password-0123');
    await applyUntilDone(driver, next);
    spec = next;
    const [row] = await query(spec, 'second-password-0123', 'SELECT 1 AS one');
    assert.deepEqual(row, { one: 1 });
    await assert.rejects(query(spec, 'first-password-0123', 'SELECT 1'), /password/);
  });
});
