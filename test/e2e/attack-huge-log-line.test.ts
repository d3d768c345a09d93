// Issue 7, hole 3 (the logs endpoint burns CPU), tried against Basin as
// shipped (`node dist/main.js`, local driver). A tenant writes a 256 MB file
// with no newline into its own log directory, as its own OS user (COPY … TO
// PROGRAM), named so that it is the newest log file; then reads its logs four
// times at once, giving up on some of the requests. Before the fix, each read
// scanned the whole file again and again (100 % CPU), other tenants' requests
// slowed down, and the work went on after the client had gone. Now:
// - every hostile page comes back (200, a bounded body, a cursor to go on),
//   and the cursor leads through the file to the tenant's real entries;
// - meanwhile another tenant's GET of its service and of its logs answers,
//   and answers right;
// - once the clients are gone, Basin's CPU use is back to idle: a bound on
//   work done, measured from /proc, not on how long anything took.
// The reader's own bounds are proved in src/drivers/local/logs/bounded-reads.test.ts.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import type { BasinProcess } from '../harness/basin-api.js';
import { installation } from './basin-process.js';
import { pgQuery } from './clients.js';
import { bootstrapTenant, newTenant, TenantApi, tenantShell } from './tenants.js';

const HUGE_BYTES = 256 * 1024 * 1024;
/** A name like PostgreSQL's own, sorting after every file it has written. */
const HUGE_FILE = 'log/postgresql-20991231-235959.json';
/**
 * The most of one core Basin may use, measured over a second once the
 * hostile clients are gone. Idle is a few per cent (the metrics sampler and
 * the reconciler); reading on for clients that left would be most of a core.
 * Generous, for a busy 2-core CI machine.
 */
const IDLE_CORES = 0.5;

/** CPU seconds (user + system, all threads) `pid` has used so far. */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name, which may hold spaces: state is field 3.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(fields[14 - 3]) + Number(fields[15 - 3]);
  return ticks / CLK_TCK;
}
const CLK_TCK = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());

/** GET of a page of logs that the client may give up on: the fetch rejects then. */
function logsRequest(b: BasinProcess, api: TenantApi, id: string, signal?: AbortSignal) {
  return fetch(`${b.url}${api.path(id)}/logs`, {
    headers: { authorization: api.tenant.authorization },
    ...(signal ? { signal } : {}),
  });
}

test(
  "a 256 MB log line without a newline costs its tenant's reads only, and only while they last",
  { timeout: 400_000 },
  async (t) => {
    const inst = await installation(t);
    const b = await inst.start();
    const hostile = new TenantApi(b, await newTenant(inst, 'hostile'));
    const victim = new TenantApi(b, bootstrapTenant(b));
    const [hSvc, vSvc] = await Promise.all([hostile.create('hostile'), victim.create('victim')]);
    await Promise.all([
      hostile.waitForStatus(hSvc.service_id, 'READY'),
      victim.waitForStatus(vSvc.service_id, 'READY'),
    ]);
    const hId = hSvc.service_id;
    const vId = vSvc.service_id;

    // Each service's own entry, for the reads to find.
    const hMarker = `hostile_marker_${hId}`;
    const vMarker = `victim_marker_${vId}`;
    for (const [svc, marker] of [
      [hSvc, hMarker],
      [vSvc, vMarker],
    ] as const) {
      await assert.rejects(
        pgQuery(svc.endpoint.port, svc.initial_password, `SELECT * FROM ${marker}`),
        /does not exist/,
      );
    }
    const vMessage = `relation "${vMarker}" does not exist`;
    const vLogsPath = `${victim.path(vId)}/logs?severities=ERROR&search=${vMarker}`;
    await b.waitFor(async () => {
      const res = await victim.call('GET', vLogsPath);
      return res.status === 200 && res.body.logs.includes(vMessage);
    }, "the victim's entry in its logs");

    await t.test(
      'as the hostile tenant: 256 MB without a newline, the newest log file',
      async () => {
        const h = await tenantShell(hSvc, hSvc.initial_password);
        try {
          // COPY … PROGRAM runs in the data directory, as the service's OS user.
          await h.feed(`head -c ${HUGE_BYTES} /dev/zero | tr '\\0' 'x' > ${HUGE_FILE}`);
          assert.deepEqual(await h.run(`stat -c %s ${HUGE_FILE}; ls log | sort | tail -1`), [
            String(HUGE_BYTES),
            HUGE_FILE.slice('log/'.length),
          ]);
        } finally {
          await h.end();
        }
      },
    );

    /** Asserts that another tenant's service and logs answer as they should. */
    const victimAnswers = async () => {
      const svc = await victim.call('GET', victim.path(vId));
      assert.equal(svc.status, 200, svc.text);
      assert.equal(svc.body.service_id, vId);
      assert.equal(svc.body.status, 'READY');
      const logs = await victim.call('GET', vLogsPath);
      assert.equal(logs.status, 200, logs.text);
      assert.ok(logs.body.logs.includes(vMessage), logs.text);
      assert.ok(
        logs.body.entries.every((e: { message: string }) => e.message.includes(vMarker)),
        'the search holds',
      );
    };
    const quietFrom = b.output().length;
    let cursor: string | undefined;

    await t.test(
      'four reads at once, two given up: the others get a bounded page with a cursor, and another tenant is answered meanwhile',
      async () => {
        const quit = [new AbortController(), new AbortController()];
        const kept = [logsRequest(b, hostile, hId), logsRequest(b, hostile, hId)];
        const given = quit.map((c) =>
          logsRequest(b, hostile, hId, c.signal).then(
            () => 'answered',
            (err: Error) => err.name,
          ),
        );
        let done = false;
        const pages = Promise.all(kept).finally(() => (done = true));
        // Another tenant goes about its business while the hostile reads run.
        let answered = 0;
        do {
          await victimAnswers();
          answered++;
          // The clients that give up do so once the first of those was answered.
          if (answered === 1) for (const c of quit) c.abort();
        } while (!done);
        for (const res of await pages) {
          assert.equal(res.status, 200);
          const text = await res.text();
          // Bounded: no line of the file (none parses), whatever its size.
          assert.ok(text.length < 64 * 1024, `a page of ${text.length} bytes`);
          const page = JSON.parse(text);
          assert.deepEqual(page.logs, []);
          assert.deepEqual(page.entries, []);
          assert.equal(typeof page.lastCursor, 'string', 'a cursor to read on');
          cursor ??= page.lastCursor;
        }
        for (const outcome of await Promise.all(given)) {
          assert.ok(['AbortError', 'answered'].includes(outcome), outcome);
        }
        await victimAnswers();
      },
    );

    await t.test('the cursor leads through the file to the real entries', async () => {
      const hMessage = `relation "${hMarker}" does not exist`;
      const seen = new Set<string>();
      for (let pages = 1; ; pages++) {
        assert.ok(cursor && !seen.has(cursor), `page ${pages} starts where no other did`);
        seen.add(cursor);
        const res = await hostile.call(
          'GET',
          `${hostile.path(hId)}/logs?cursor=${encodeURIComponent(cursor)}`,
        );
        assert.equal(res.status, 200, res.text);
        assert.ok(res.text.length < 1024 * 1024, `page ${pages}: ${res.text.length} bytes`);
        // Nothing of the file shows (no line of it parses); past it, the real entries.
        assert.ok(
          res.body.logs.every((m: string) => !m.includes('xxxxxxxx')),
          `page ${pages} shows the file`,
        );
        if (res.body.logs.includes(hMessage)) break;
        cursor = res.body.lastCursor;
        // 16 MiB a page at most: 16 pages, more on a machine slow enough for the time bound.
        assert.ok(pages < 2_000, 'the pages move on through the file');
      }
    });

    await t.test(
      "clients that give up leave Basin idle, and nothing logged as Basin's error",
      async () => {
        const quit = new AbortController();
        const reads = [0, 1, 2, 3].map(() =>
          logsRequest(b, hostile, hId, quit.signal).then(
            () => 'answered',
            (err: Error) => err.name,
          ),
        );
        // Once another tenant has been answered, the four give up.
        await victimAnswers();
        quit.abort();
        for (const outcome of await Promise.all(reads)) {
          assert.ok(['AbortError', 'answered'].includes(outcome), outcome);
        }
        const before = cpuSeconds(b.pid);
        const started = process.hrtime.bigint();
        await new Promise((r) => setTimeout(r, 1_000));
        const used = cpuSeconds(b.pid) - before;
        const wall = Number(process.hrtime.bigint() - started) / 1e9;
        assert.ok(
          used / wall < IDLE_CORES,
          `Basin used ${used.toFixed(2)} s of CPU in ${wall.toFixed(2)} s after its clients left`,
        );
        await victimAnswers();
        // A client that leaves is not Basin's error: nothing at error level, no 500.
        const said = b.output().slice(quietFrom);
        assert.doesNotMatch(said, /"level":(50|60)/);
        assert.doesNotMatch(said, /"statusCode":5\d\d/);
      },
    );
  },
);
