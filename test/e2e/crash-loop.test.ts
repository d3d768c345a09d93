// Issue 18, item 6 (crash loops), tried against Basin as shipped (`node
// dist/main.js`, local driver): a tenant, as its service's tsdbadmin
// (COPY … TO PROGRAM runs as the service's OS user, in the data
// directory), kills its own postmaster with SIGKILL twenty times, each
// time as soon as the server is back. Before, Basin restarted it at every
// reconcile tick, without backoff and without a word in its logs. Now:
// - each death is a Basin entry of the service's logs (source basin) with
//   the reason, `killed by SIGKILL`, and when the restart comes: the first
//   at once, then the delay doubling from --restart-backoff-ms up to
//   --restart-backoff-max-ms, and there it stays;
// - the service is UNSTABLE while a restart waits, READY once it runs;
// - a node that ran for --restart-stable-ms before it died is restarted
//   at once again (a new count).
// The flags shorten the policy (1 s doubling to 5 min, stable after 10 min:
// here 250 ms doubling to 1 s, stable after 8 s) so that the test takes a
// minute; what is asserted is what Basin wrote and reported, never how
// long anything took.

import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import { installation } from './basin-process.js';
import { pgQuery } from './clients.js';
import { bootstrapTenant, type CreatedService, TenantApi, tenantShell } from './tenants.js';

const KILLS = 20;
const STABLE_MS = 8_000;

/** The postmaster's start time, as the server says, once it accepts a login. */
async function startedAt(svc: CreatedService): Promise<number | undefined> {
  try {
    const rows = await pgQuery(
      svc.endpoint.port,
      svc.initial_password,
      'SELECT extract(epoch FROM pg_postmaster_start_time()) * 1000 AS t',
    );
    return Number(rows[0].t);
  } catch {
    return undefined; // not running (yet)
  }
}

/** The tenant kills its own postmaster with SIGKILL, from inside its server. */
async function killOwnPostmaster(svc: CreatedService): Promise<void> {
  const shell = await tenantShell(svc, svc.initial_password);
  // The backend running the program dies with its postmaster: the COPY fails.
  await shell.feed('kill -9 "$(head -1 postmaster.pid)"').catch(() => {});
  await shell.end();
}

/** Basin's own entries of the service's logs, oldest first. */
async function basinEntries(api: TenantApi, id: string) {
  const res = await api.call('GET', `${api.path(id)}/logs?source=basin`);
  assert.equal(res.status, 200, res.text);
  const entries = res.body.entries as { message: string; severity: string; source: string }[];
  assert.ok(entries.every((e) => e.source === 'basin'));
  return entries.reverse();
}

test(
  'a postmaster killed 20 times in a row is restarted with backoff, each restart and its reason in the logs, UNSTABLE while it waits',
  { timeout: 600_000 },
  async (t) => {
    const inst = await installation(t);
    const b = await inst.start({
      args: [
        '--reconcile-interval-ms',
        '200',
        '--restart-backoff-ms',
        '250',
        '--restart-backoff-max-ms',
        '1000',
        '--restart-stable-ms',
        String(STABLE_MS),
      ],
    });
    const api = new TenantApi(b, bootstrapTenant(b));
    const svc = await api.create('looping');
    const id = svc.service_id;
    await api.waitForStatus(id, 'READY');

    const first = await startedAt(svc);
    assert.ok(first, 'the service accepts logins');
    let started: number = first;
    const unstableSeen: number[] = [];
    for (let kill = 1; kill <= KILLS; kill++) {
      await killOwnPostmaster(svc);
      // Until a new postmaster accepts logins, watch the status.
      let sawUnstable = false;
      const before = started;
      started = await b.waitFor<number>(
        async () => {
          const res = await api.call('GET', api.path(id));
          if (res.body?.status === 'UNSTABLE') sawUnstable = true;
          const now = await startedAt(svc);
          return now !== undefined && now > before ? now : undefined;
        },
        `a new postmaster after kill ${kill}`,
        120_000,
      );
      if (sawUnstable) unstableSeen.push(kill);
      await api.waitForStatus(id, 'READY');
    }

    const deaths = (await basinEntries(api, id)).filter((e) =>
      /stopped on its own/.test(e.message),
    );
    assert.equal(deaths.length, KILLS, deaths.map((e) => e.message).join('\n'));
    for (const e of deaths) {
      assert.equal(e.severity, 'WARNING');
      assert.match(
        e.message,
        /^basin: node0 stopped on its own \(killed by SIGKILL\) after running /,
      );
    }
    const when = deaths.map(
      (e) => /; (restarting it|restart \d+ in a row, in [^ ]+ \w+)/.exec(e.message)?.[1],
    );
    assert.deepEqual(when, [
      'restarting it',
      'restart 2 in a row, in 250 ms',
      'restart 3 in a row, in 500 ms',
      'restart 4 in a row, in 1 s',
      // Capped: no longer doubling.
      ...Array.from({ length: KILLS - 4 }, (_, i) => `restart ${i + 5} in a row, in 1 s`),
    ]);
    // Every restart that waited a second or more was waited for as UNSTABLE.
    for (let kill = 4; kill <= KILLS; kill++) {
      assert.ok(unstableSeen.includes(kill), `UNSTABLE while restart ${kill} waited`);
    }

    // Up for longer than the stable time: the next death is restarted at once.
    await sleep(STABLE_MS + 1_000);
    await killOwnPostmaster(svc);
    const last = started;
    await b.waitFor(
      async () => ((await startedAt(svc)) ?? 0) > last,
      'a new postmaster after the stable run',
    );
    await api.waitForStatus(id, 'READY');
    const after = (await basinEntries(api, id)).filter((e) => /stopped on its own/.test(e.message));
    assert.equal(after.length, KILLS + 1);
    assert.match(after.at(-1)!.message, /; restarting it$/);
  },
);
