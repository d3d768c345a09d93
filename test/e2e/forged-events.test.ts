// Issue 18, item 5 (forged events), tried against Basin as shipped (`node
// dist/main.js`, local driver): a tenant's role writes lines into its
// server's log that read exactly like Basin's own entries (`RAISE LOG
// 'basin: provisioning failed: …'`). Before, they came back from the logs
// API like Basin's and matched `search=basin`. Now every entry carries
// `source`, which Basin sets from where it read the entry, never from its
// text, and `source=basin` (what the README tells clients to use) reads
// Basin's own entries only:
// - the forged lines come back as `source: database`, whatever they say,
//   also when a search for `basin` finds them;
// - `source=basin` returns Basin's real entry (a restart after the tenant
//   killed its postmaster) and none of the forged ones;
// - `source=database` returns the forged lines and never Basin's entry.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { installation } from './basin-process.js';
import { pgQuery } from './clients.js';
import { bootstrapTenant, type CreatedService, TenantApi, tenantShell } from './tenants.js';

// The second mimics Basin's own entry word for word, but for a running time
// its server in this test never has (with "1 s", the real entry of the
// kill below could say exactly that, and was counted as the forgery).
const FORGED = [
  'basin: provisioning failed: forged by a tenant',
  'basin: node0 stopped on its own (killed by SIGKILL) after running 9999 s; restarting it',
] as const;

interface Entry {
  message: string;
  severity: string;
  timestamp: string;
  source: string;
}

async function entries(api: TenantApi, id: string, query: string): Promise<Entry[]> {
  const res = await api.call('GET', `${api.path(id)}/logs?${query}`);
  assert.equal(res.status, 200, res.text);
  assert.deepEqual(
    res.body.logs,
    res.body.entries.map((e: Entry) => e.message),
  );
  return res.body.entries;
}

async function postmasterStart(svc: CreatedService): Promise<number | undefined> {
  try {
    const [row] = await pgQuery(
      svc.endpoint.port,
      svc.initial_password,
      'SELECT extract(epoch FROM pg_postmaster_start_time()) * 1000 AS t',
    );
    return Number(row.t);
  } catch {
    return undefined;
  }
}

test(
  "a role's RAISE LOG 'basin: …' is the database's, never taken for Basin's entry",
  { timeout: 300_000 },
  async (t) => {
    const inst = await installation(t);
    const b = await inst.start({ args: ['--reconcile-interval-ms', '500'] });
    const api = new TenantApi(b, bootstrapTenant(b));
    const svc = await api.create('forger');
    const id = svc.service_id;
    await api.waitForStatus(id, 'READY');

    // The tenant forges, as LOG and as WARNING, from a plain session.
    const shell = await tenantShell(svc, svc.initial_password);
    for (const [level, text] of [
      ['LOG', FORGED[0]],
      ['WARNING', FORGED[1]],
    ] as const) {
      await shell.client.query(
        `DO $$ BEGIN RAISE ${level} '%', ${shell.client.escapeLiteral(text)}; END $$`,
      );
    }
    // …and makes Basin write a real entry: it kills its own postmaster.
    const before = await postmasterStart(svc);
    await shell.feed('kill -9 "$(head -1 postmaster.pid)"').catch(() => {});
    await shell.end();
    await b.waitFor(
      async () => ((await postmasterStart(svc)) ?? 0) > (before ?? 0),
      'the postmaster started again',
    );
    await api.waitForStatus(id, 'READY');

    // Searching the text finds both kinds, each saying who wrote it.
    const found = await b.waitFor(async () => {
      const got = await entries(api, id, 'search=basin');
      return FORGED.every((f) => got.some((e) => e.message === f)) ? got : undefined;
    }, 'the forged lines in the logs');
    for (const f of FORGED) {
      const forged = found.filter((e) => e.message === f);
      assert.ok(forged.length >= 1);
      assert.ok(
        forged.every((e) => e.source === 'database'),
        `${f}: ${JSON.stringify(forged)}`,
      );
    }
    // Basin's own entry about the restart (a backup it was taking when the
    // postmaster died may add one of its own: that one is Basin's too).
    const restart =
      /^basin: node0 stopped on its own \(killed by SIGKILL\) after running .*; restarting it$/;
    const real = found.filter((e) => e.source === 'basin' && restart.test(e.message));
    assert.equal(real.length, 1, JSON.stringify(found.filter((e) => e.source === 'basin')));

    // Basin's entries alone: the real one, none of the forged.
    const ours = await entries(api, id, 'source=basin');
    assert.ok(
      ours.every((e) => e.source === 'basin'),
      JSON.stringify(ours),
    );
    assert.ok(ours.some((e) => e.message === real[0]!.message));
    assert.ok(!ours.some((e) => (FORGED as readonly string[]).includes(e.message)));
    const oursSearched = await entries(api, id, 'source=basin&search=provisioning');
    assert.ok(
      !oursSearched.some((e) => e.message === FORGED[0]),
      "the forged provisioning failure is not one of Basin's",
    );

    // The database's alone: the forged lines, never Basin's entry.
    const theirs = await entries(api, id, 'source=database&search=basin');
    for (const f of FORGED)
      assert.ok(
        theirs.some((e) => e.message === f),
        f,
      );
    assert.ok(theirs.every((e) => e.source === 'database'));
    assert.ok(!theirs.some((e) => e.message === real[0]!.message && e.source === 'basin'));

    assert.equal(
      (await api.call('GET', `${api.path(id)}/logs?source=tenant`)).status,
      400,
      'an unknown source is refused',
    );
  },
);
