// A provisioning that keeps failing, through Basin as shipped (issue 6, item
// 3): the failure is visible through the API, not only in the server's
// stdout, and bounded. Another program takes the port Basin gave the new
// service before its server starts (the first create of an installation
// waits for the template, so there is time), so every start fails with
// "Port … is in use". Basin retries with growing delays, writes `basin: …`
// entries into the service's logs (a handful, not one per retry), moves the
// service to UNSTABLE with the reason, and a user's `start` tries again once
// the port is free. The program listens in the service's own network
// namespace, made before anything of the service starts: the only place
// where anything can take a service's port (a program in the host's
// network cannot: attack-port-hijack.test.ts); this test, as root, puts it
// there.

import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { Layout } from '../../src/drivers/local/layout.js';
import { test } from 'node:test';
import { installation } from './basin-process.js';
import { conninfo, psql } from './clients.js';

/** A process listening on `port` in the network namespace `netns`; resolves once it listens. */
async function listenIn(netns: string, port: number): Promise<ChildProcess> {
  const child = spawn(
    'nsenter',
    [
      `--net=${netns}`,
      '--',
      process.execPath,
      '-e',
      `require('net').createServer().listen(${port}, '0.0.0.0', () => console.log('listening'))`,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  await new Promise<void>((resolve, reject) => {
    child.stdout?.once('data', () => resolve());
    child.once('exit', (code) => reject(new Error(`the squatter exited (${code})`)));
  });
  return child;
}

test(
  'a failing provisioning is retried with backoff, ends UNSTABLE with its reason in the logs, and start retries it',
  { timeout: 180_000 },
  async (t) => {
    const inst = await installation(t, { ownTemplate: true });
    const b = await inst.start();
    const created = await b.call('POST', b.servicePath(), {
      name: 'squatted',
      addons: [],
      cpu_millis: 'shared',
      memory_gbs: 'shared',
    });
    assert.equal(created.status, 202, created.text);
    const id: string = created.body.service_id;
    const port: number = created.body.endpoint.port;
    const tag = readFileSync(new Layout(inst.dataDir).installationFile, 'utf8').trim();
    const netns = `/run/netns/basin-${tag}-${id}`;
    await b.waitFor(async () => existsSync(netns), "the service's network namespace");
    const squatter = await listenIn(netns, port);
    t.after(() => squatter.kill('SIGKILL'));

    const basinEntries = async () => {
      const res = await b.call('GET', `${b.servicePath(id)}/logs?source=basin`);
      assert.equal(res.status, 200, res.text);
      return res.body.entries as { severity: string; message: string }[];
    };

    // The first failed attempt is in the logs at once, with what to retry and why.
    const first = await b.waitFor(async () => {
      const entries = await basinEntries();
      return entries.find((e) => /attempt 1\), retrying in/.test(e.message));
    }, 'a basin: entry about the first failed attempt');
    assert.equal(first.severity, 'WARNING');
    assert.match(first.message, new RegExp(`Port ${port} is in use`));

    // After a few attempts, each later than the last, the service is UNSTABLE
    // and an ERROR entry says why.
    const unstable = await b.waitForStatus(id, 'UNSTABLE', 120_000);
    assert.equal(unstable.service_id, id);
    const entries = await basinEntries();
    const error = entries.find((e) => e.severity === 'ERROR');
    assert.ok(error, JSON.stringify(entries));
    assert.match(error.message, /^basin: provisioning failed \(attempt \d+\)/);
    assert.match(error.message, new RegExp(`Port ${port} is in use`));
    // Not one entry per retry: the first, each doubling and the one that gave up.
    const attempts = entries.map((e) => Number(/attempt (\d+)/.exec(e.message)?.[1]));
    assert.ok(
      attempts.every((n) => Number.isInteger(n) && ((n & (n - 1)) === 0 || n === 5)),
      `attempts written: ${attempts.join(', ')}`,
    );
    assert.ok(entries.length <= 5, `${entries.length} entries`);

    // The port is free again; the user asks for a start, and the service runs.
    const gone = new Promise((resolve) => squatter.once('exit', resolve));
    squatter.kill('SIGKILL');
    await gone;
    const start = await b.call('POST', `${b.servicePath(id)}/start`);
    assert.equal(start.status, 202, start.text);
    const ready = await b.waitForStatus(id, 'READY', 60_000);
    const password: string = created.body.initial_password;
    assert.equal(await psql(conninfo(ready.endpoint.port), password, 'SELECT 40 + 2'), '42');
  },
);
