// Issue 7, hole 2 (one project freezes the control plane for all), tried
// against Basin as shipped (`node dist/main.js`, local driver). A tenant, as
// each of its services' OS users (COPY … FROM PROGRAM), moves the server's
// Unix socket aside and listens in its place with a program that lets a
// client log in and then never answers a query, on four services (as many
// as the engine has slots), then asks for a password change on each: every
// change needs Basin's administrative connection, which goes through that
// socket. Before the fix, those connections had no timeout, every engine
// slot hung, other projects' creates stayed QUEUED for minutes, SIGTERM hung
// and a restarted Basin froze again. Now:
// - another project's create becomes READY while the tenant's changes are
//   still pending (the old passwords still work, the new ones do not);
// - SIGTERM ends Basin (with exit code 0) within the harness's bound;
// - a restarted Basin takes the tenant's changes up again, which hang
//   again, and still serves: the other project's service is READY and its
//   next create becomes READY too.
// What bounds each connection is proved at the driver in
// test/local/hung-socket.test.ts; how the engine shares its slots between
// projects and drains on shutdown, in test/engine/engine.test.ts.

import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Layout, socketName } from '../../src/drivers/local/layout.js';
import type { BasinProcess } from '../harness/basin-api.js';
import { installation } from './basin-process.js';
import { pgQuery, pgRefused } from './clients.js';
import {
  bootstrapTenant,
  type CreatedService,
  newTenant,
  TenantApi,
  tenantShell,
} from './tenants.js';

/** Services the tenant hangs: the engine's slots (4 by default). */
const HUNG = 4;

/**
 * The tenant's program (node, which a Basin host has). Moves the socket given
 * as its argument to `<socket>.real`, listens in its place, and answers any
 * startup message with AuthenticationOk and ReadyForQuery, then nothing
 * ever again. Each connection and disconnection is appended to
 * `<socket>.hung`, for the test to see when Basin is stuck on it.
 */
const FAKE_SERVER = `
const fs = require('node:fs');
const net = require('node:net');
const socket = process.argv[process.argv.length - 1];
const note = (line) => fs.appendFileSync(socket + '.hung', line + '\\n');
fs.renameSync(socket, socket + '.real');
net.createServer((c) => {
  note('open');
  c.on('error', () => {});
  c.on('close', () => note('close'));
  let got = Buffer.alloc(0);
  let loggedIn = false;
  c.on('data', (data) => {
    if (loggedIn) return;
    got = Buffer.concat([got, data]);
    if (got.length < 4 || got.length < got.readInt32BE(0)) return;
    loggedIn = true;
    c.write(Buffer.from([0x52, 0, 0, 0, 8, 0, 0, 0, 0, 0x5a, 0, 0, 0, 5, 0x49]));
  });
}).listen(socket, () => note('listening'));
`;

interface Hung {
  svc: CreatedService;
  /** Where the server's socket was, where the tenant's program now listens. */
  socket: string;
}

/** What the tenant's program noted so far: connections opened and closed. */
function notes(h: Hung): { open: number; close: number } {
  const file = `${h.socket}.hung`;
  const lines = existsSync(file) ? readFileSync(file, 'utf8').split('\n') : [];
  return {
    open: lines.filter((l) => l === 'open').length,
    close: lines.filter((l) => l === 'close').length,
  };
}

/** Whether Basin is connected to the tenant's program on `h` right now. */
const stuck = (h: Hung) => notes(h).open > notes(h).close;

test(
  "a tenant's hung sockets hold back no other project's create, nor SIGTERM, nor a restart",
  { timeout: 600_000 },
  async (t) => {
    // Shutdown waits 2 s for running operations instead of 10: the stuck
    // ones never finish within it either way (they resume at the next start).
    const inst = await installation(t, { args: ['--drain-timeout-ms', '2000'] });
    let b: BasinProcess = await inst.start();
    const layout = new Layout(inst.dataDir);
    const hostileTenant = await newTenant(inst, 'hostile');
    let hostile = new TenantApi(b, hostileTenant);
    let victim = new TenantApi(b, bootstrapTenant(b));

    const svcs = await Promise.all(
      Array.from({ length: HUNG }, (_, i) => hostile.create(`hung-${i}`)),
    );
    await Promise.all(svcs.map((s) => hostile.waitForStatus(s.service_id, 'READY')));
    const hung: Hung[] = [];

    await t.test(
      'as the tenant: its own sockets replaced by a program that never answers',
      async () => {
        const program = Buffer.from(FAKE_SERVER).toString('base64');
        for (const svc of svcs) {
          const sh = await tenantShell(svc, svc.initial_password);
          try {
            // Where its server listens, as the tenant finds it (CREATEROLE
            // grants it the role that shows every setting).
            await sh.client.query('GRANT pg_read_all_settings TO tsdbadmin');
            const [where] = (
              await sh.client.query(
                "SELECT current_setting('unix_socket_directories') AS dir, current_setting('port') AS port",
              )
            ).rows;
            const socket = join(where.dir, socketName(Number(where.port)));
            assert.equal(
              socket,
              join(
                layout.socketDir({ id: svc.service_id, node: 0 }),
                socketName(svc.endpoint.port),
              ),
            );
            const script = `/tmp/hang-${svc.service_id}.js`;
            const said = await sh.run(
              [
                `echo ${program} | base64 -d > ${script}`,
                // Detached: it outlives this COPY, the session and Basin.
                `(setsid ${process.execPath} ${script} ${socket} </dev/null >/dev/null 2>&1 &)`,
                `for i in $(seq 1 200); do grep -q listening ${socket}.hung 2>/dev/null && break; sleep 0.05; done`,
                `test -S ${socket} && test -S ${socket}.real && echo listening in its place`,
              ].join('; '),
            );
            assert.deepEqual(said, ['listening in its place']);
            hung.push({ svc, socket });
          } finally {
            await sh.end();
          }
        }
      },
    );

    /** Basin's administrative connections stuck on at least two of the tenant's programs. */
    const stuckOnTenant = () =>
      b.waitFor(
        // Two: the most one project may hold of the engine's four slots by
        // default (all four when nothing keeps a project to a share of them).
        async () => hung.filter(stuck).length >= 2,
        () => `Basin to be connected to the tenant's programs: ${JSON.stringify(hung.map(notes))}`,
        120_000,
      );
    /** How many of Basin's connections to the tenant's programs ended (the attempt gave up). */
    const gaveUp = () => hung.reduce((n, h) => n + notes(h).close, 0);

    await t.test('then asks for a password change on each: Basin gets stuck on them', async () => {
      for (const { svc } of hung) {
        const res = await hostile.call('POST', `${hostile.path(svc.service_id)}/updatePassword`, {
          password: `changed-${svc.service_id}`,
        });
        assert.equal(res.status, 204, res.text);
      }
      await stuckOnTenant();
    });

    /** The tenant's changes have not gone through: the old passwords work, the new ones do not. */
    const stillPending = async () => {
      for (const { svc, socket } of hung) {
        const [row] = await pgQuery(svc.endpoint.port, svc.initial_password, 'SELECT 1 AS one');
        assert.deepEqual(row, { one: 1 }, 'the old password still works');
        assert.match(
          await pgRefused(svc.endpoint.port, `changed-${svc.service_id}`),
          /password authentication failed/,
        );
        assert.ok(existsSync(`${socket}.real`), "the tenant's program is still in place");
      }
    };

    /**
     * Another project's create, made while Basin is stuck on the tenant, is
     * taken up before any of those stuck attempts has given up (an attempt
     * stuck on the tenant gives up after the admin connection's query
     * bound, 15 s): it did not wait for the tenant's work to time out (the
     * engine keeps slots for other projects), and becomes READY, held back
     * by nothing but its own work.
     */
    const createWhileStuck = async (name: string): Promise<CreatedService> => {
      const ended = gaveUp();
      const svc = await victim.create(name);
      // Taken up (QUEUED → CONFIGURING: its operation claimed) while every
      // stuck attempt still hangs: it did not wait for a slot the tenant
      // held. Its own work may then take longer than an attempt's bound
      // on a loaded machine, and attempts give up meanwhile: not its wait.
      for (;;) {
        const got = await victim.call('GET', victim.path(svc.service_id));
        assert.equal(got.status, 200, got.text);
        if (got.body.status !== 'QUEUED') break;
        await sleep(50);
      }
      assert.equal(
        gaveUp(),
        ended,
        `the create waited for the tenant's stuck attempts to give up: ${JSON.stringify(hung.map(notes))}`,
      );
      await victim.waitForStatus(svc.service_id, 'READY');
      const [row] = await pgQuery(svc.endpoint.port, svc.initial_password, 'SELECT 1 AS one');
      assert.deepEqual(row, { one: 1 });
      await stillPending();
      return svc;
    };

    await t.test(
      "another project's create becomes READY while Basin is stuck on the tenant",
      async () => {
        const first = await createWhileStuck('bystander');
        // Both projects are still served.
        const list = await victim.call('GET', victim.path());
        assert.equal(list.status, 200, list.text);
        assert.deepEqual(
          list.body.map((s: { service_id: string }) => s.service_id),
          [first.service_id],
        );
        const mine = await hostile.call('GET', hostile.path());
        assert.equal(mine.status, 200, mine.text);
        assert.equal(mine.body.length, HUNG);
      },
    );

    await t.test('SIGTERM ends Basin while it is stuck on the tenant', async () => {
      await b.waitFor(async () => hung.some(stuck), 'Basin to be stuck on the tenant', 120_000);
      // b.stop() sends SIGTERM and waits; past its bound it kills Basin and fails.
      assert.deepEqual(await b.stop(), { code: 0, signal: null });
    });

    await t.test(
      'a restarted Basin gets stuck on the tenant again, and still serves everyone else',
      async () => {
        b = await inst.start();
        hostile = new TenantApi(b, hostileTenant);
        victim = new TenantApi(b, bootstrapTenant(b));
        // Basin's connections ended with it; the programs outlived it, as
        // databases do. The tenant's changes were not lost: Basin takes them
        // up again, and gets stuck again.
        await stuckOnTenant();
        // The other project's service is READY, and its next create too.
        const theirs = await victim.call('GET', victim.path());
        assert.equal(theirs.status, 200, theirs.text);
        assert.equal(theirs.body.length, 1);
        assert.equal(theirs.body[0].status, 'READY');
        await createWhileStuck('after-restart');
      },
    );
  },
);
