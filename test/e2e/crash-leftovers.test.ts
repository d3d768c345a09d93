// Issue 12: nothing is left behind by a crash. Basin as shipped (dist/main.js,
// local driver) is killed with SIGKILL while it builds the PostgreSQL
// template (its set-up postmaster running in a staging directory) and while
// it issues a server certificate (a private key in a staging directory);
// after one restart the data directory holds only what live services own
// (network namespaces included), no process runs that nothing owns, and the
// services are READY. A second Basin
// on the same data directory is refused, and a converge that changes nothing
// keeps the same certificate.

import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, readlinkSync, watch } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import type { BasinProcess } from '../harness/basin-api.js';
import { installation, type Installation } from './basin-process.js';
import { conninfo, psql } from './clients.js';

interface Proc {
  pid: number;
  cwd: string;
  argv: string[];
}

/** Every live process whose working directory or arguments lie under `dir`. */
function processesUnder(dir: string): Proc[] {
  const out: Proc[] = [];
  for (const name of readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      if (/^[ZX]/.test(stat.slice(stat.lastIndexOf(')') + 2))) continue;
      const cwd = readlinkSync(`/proc/${name}/cwd`);
      const argv = readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0').filter(Boolean);
      const under = (p: string) => p === dir || p.startsWith(`${dir}/`);
      if (under(cwd) || argv.some(under)) out.push({ pid: Number(name), cwd, argv });
    } catch {
      // exited meanwhile
    }
  }
  return out;
}

/** What lies in the local driver's tree that no live service (or the installation) owns. */
function ownerless(root: string, services: string[]): string[] {
  const stray: string[] = [];
  const expectTop = new Set([
    'installation',
    'template',
    'ca',
    'instances',
    's',
    'archive',
    'backup',
    // Services' repositories with servers of their own (repository/).
    'repos',
    'haproxy',
    // The nftables table last loaded (network/service-networks.ts).
    'network.nft',
  ]);
  for (const name of readdirSync(root)) if (!expectTop.has(name)) stray.push(name);
  for (const id of readdirSync(join(root, 'instances'))) {
    if (!services.includes(id)) stray.push(`instances/${id}`);
    for (const name of readdirSync(join(root, 'instances', id))) {
      // A live service's records: network.json, its network namespace;
      // system-id, its system identifier; storage.json, the storage watch's.
      const records = ['pooler', 'network.json', 'system-id', 'storage.json'];
      if (!/^\d+$/.test(name) && !records.includes(name)) {
        stray.push(`instances/${id}/${name}`);
      }
    }
  }
  // The network namespaces of this installation: live services' only.
  const tag = readFileSync(join(root, 'installation'), 'utf8').trim();
  for (const name of existsSync('/run/netns') ? readdirSync('/run/netns') : []) {
    const id = name.startsWith(`basin-${tag}-`) ? name.slice(`basin-${tag}-`.length) : undefined;
    if (id !== undefined && !services.includes(id)) stray.push(`/run/netns/${name}`);
  }
  for (const name of readdirSync(join(root, 's'))) {
    const m = /^([a-z0-9]+)-(\d+)$/.exec(name);
    if (!m || !services.includes(m[1]!) || !existsSync(join(root, 'instances', m[1]!, m[2]!))) {
      stray.push(`s/${name}`);
    }
  }
  for (const id of existsSync(join(root, 'repos')) ? readdirSync(join(root, 'repos')) : []) {
    if (!services.includes(id)) stray.push(`repos/${id}`);
  }
  for (const id of readdirSync(join(root, 'backup'))) {
    if (!services.includes(id)) stray.push(`backup/${id}`);
    for (const name of readdirSync(join(root, 'backup', id))) {
      if (name.startsWith('.')) stray.push(`backup/${id}/${name}`);
    }
  }
  return stray;
}

/** Processes under the data directory that are not a live service's server (or its repository's) or the HAProxy. */
function strayProcesses(root: string, services: string[]): Proc[] {
  return processesUnder(root).filter((p) => {
    const ownedBy = services.find(
      (id) =>
        p.cwd.startsWith(join(root, 'instances', id) + '/') || p.cwd === join(root, 'repos', id),
    );
    const haproxy = p.argv.some((a) => a.startsWith(join(root, 'haproxy') + '/'));
    return !ownedBy && !haproxy;
  });
}

function certSerial(root: string, id: string): string {
  const file = join(root, 'instances', id, '0', 'pgdata', 'server.crt');
  return new X509Certificate(readFileSync(file)).serialNumber;
}

interface Ready {
  id: string;
  password: string;
  port: number;
}

async function createReady(b: BasinProcess, name: string): Promise<Ready> {
  const res = await b.call('POST', b.servicePath(), { name });
  assert.equal(res.status, 202, res.text);
  const ready = await b.waitForStatus(res.body.service_id, 'READY', 120_000);
  return { id: ready.service_id, password: res.body.initial_password, port: ready.endpoint.port };
}

/** psql over TLS can read and write the service. */
async function assertServes(svc: Ready): Promise<void> {
  const sql =
    'CREATE TABLE IF NOT EXISTS t (v int); INSERT INTO t VALUES (1); SELECT count(*) > 0 FROM t';
  assert.equal(await psql(conninfo(svc.port), svc.password, sql), 't');
}

/**
 * The OS users of this installation's uid range (services' `basin-<id>`,
 * repositories' `basin-r-<id>`) whose service is not among `services`.
 */
function orphanUsers(inst: Installation, services: string[]): string[] {
  return readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .map((line) => line.split(':'))
    .filter(([name, , uid]) => {
      const n = Number(uid);
      return name?.startsWith('basin-') && n >= inst.serviceUids.min && n <= inst.serviceUids.max;
    })
    .map(([name]) => name!)
    .filter((name) => !services.includes(name.replace(/^basin-(r-)?/, '')));
}

/** Settled (every service READY, no build running): nothing staged, no stray process. */
async function assertClean(inst: Installation, b: BasinProcess, services: string[]): Promise<void> {
  const root = join(inst.dataDir, 'local');
  await b.waitFor(
    async () =>
      ownerless(root, services).length === 0 &&
      strayProcesses(root, services).length === 0 &&
      orphanUsers(inst, services).length === 0,
    () =>
      `no leftovers; still: ${JSON.stringify(ownerless(root, services))}, processes ` +
      JSON.stringify(strayProcesses(root, services).map((p) => p.argv.join(' '))) +
      `, OS users ${JSON.stringify(orphanUsers(inst, services))}`,
    20_000,
  );
}

/**
 * Calls `then` as soon as a staging directory `<root>/<prefix>…` holds `file`:
 * inotify tells at once when the directory appears, then the file is looked
 * for without pausing (the step lasts some milliseconds).
 */
function onStagedFile(root: string, prefix: string, file: string, then: () => void): () => void {
  let done = false;
  const watcher = watch(root, (_event, name) => {
    if (done || !name?.startsWith(prefix)) return;
    const path = join(root, name, file);
    const until = Date.now() + 2_000;
    while (Date.now() < until && existsSync(join(root, name))) {
      if (existsSync(path)) {
        done = true;
        watcher.close();
        then();
        return;
      }
    }
  });
  return () => watcher.close();
}

test(
  'kill -9 of Basin mid template build and mid certificate leaves nothing after one restart',
  { timeout: 400_000 },
  async (t) => {
    const inst = await installation(t, { ownTemplate: true });
    const root = join(inst.dataDir, 'local');
    const services: Ready[] = [];

    await t.test('killed while the template is being set up', async () => {
      const first = inst.launch();
      // The template is built in the background at start: wait for its set-up
      // server (postgres -D <root>/.staging-template-…/pgdata), then kill Basin.
      let template: Proc | undefined;
      for (const deadline = Date.now() + 60_000; !template && Date.now() < deadline;) {
        template = existsSync(root)
          ? processesUnder(root).find((p) => p.argv.some((a) => a.includes('/.staging-template-')))
          : undefined;
        if (!template) await sleep(5);
      }
      assert.ok(template, `the template's server never ran:\n${first.tail()}`);
      await first.kill();
      const staged = readdirSync(root).filter((n) => n.startsWith('.staging-template-'));
      assert.equal(staged.length, 1, 'the kill landed mid-build: its staging directory is there');
      // Its server and children die with Basin; they do not wait for a restart.
      for (let i = 0; processesUnder(join(root, staged[0]!)).length > 0; i++) {
        assert.ok(i < 400, `the template's server outlived Basin: ${first.tail()}`);
        await sleep(25);
      }

      const second = await inst.start();
      try {
        services.push(await createReady(second, 'after-template-kill'));
        await assertServes(services[0]!);
        await assertClean(
          inst,
          second,
          services.map((s) => s.id),
        );
      } finally {
        await second.kill(); // the tests after this one need the data directory
      }
    });

    await t.test('killed while a certificate is being issued', async () => {
      // Each create issues its node a certificate in a root-only staging
      // directory; Basin is killed the moment one appears. A kill that came
      // too late (the step had finished) is tried again with another service.
      let caught = false;
      for (let attempt = 0; attempt < 5 && !caught; attempt++) {
        const b = await inst.start();
        let killed: Promise<void> | undefined;
        const stop = onStagedFile(root, '.staging-cert-', 'req.key', () => (killed = b.kill()));
        const res = await b.call('POST', b.servicePath(), { name: `cert-kill-${attempt}` });
        assert.equal(res.status, 202, res.text);
        const password = res.body.initial_password as string;
        for (let i = 0; !killed && i < 2400; i++) await sleep(25);
        stop();
        if (!killed) {
          const tail = b.tail();
          await b.kill(); // the tests after this one need the data directory
          assert.fail(`no certificate was issued:\n${tail}`);
        }
        await killed;
        caught = readdirSync(root).some(
          (n) => n.startsWith('.staging-cert-') && existsSync(join(root, n, 'req.key')),
        );
        const after = await inst.start();
        const ready = await after.waitForStatus(res.body.service_id, 'READY', 120_000);
        services.push({ id: ready.service_id, password, port: ready.endpoint.port });
        await after.kill();
      }
      assert.ok(caught, 'one of the kills landed while a private key sat in staging');

      const b = await inst.start();
      for (const svc of services) await assertServes(svc);
      await assertClean(
        inst,
        b,
        services.map((s) => s.id),
      );
      await b.stop();
    });

    await t.test('killed at moments spread over mixed operations', async () => {
      // Each round asks for a create, a delete and a password change, then
      // kills Basin after a delay that moves through the operations' steps
      // (useradd, the clone, certificates, the server's start, rm, userdel).
      const base = services[0]!;
      const gone: string[] = [];
      for (const [round, delayMs] of [100, 300, 600, 900, 1300, 1800].entries()) {
        const b = await inst.start();
        const created = await b.call('POST', b.servicePath(), { name: `mixed-${round}` });
        assert.equal(created.status, 202, created.text);
        const victim = services.find((s) => s !== base && !gone.includes(s.id));
        if (victim) {
          assert.equal((await b.call('DELETE', b.servicePath(victim.id))).status, 202);
          gone.push(victim.id);
        }
        base.password = `password-of-round-${round}`;
        const pw = await b.call('POST', `${b.servicePath(base.id)}/updatePassword`, {
          password: base.password,
        });
        assert.ok(pw.status < 300, pw.text);
        services.push({
          id: created.body.service_id,
          password: created.body.initial_password,
          port: 0,
        });
        await sleep(delayMs);
        await b.kill();
      }
      const b = await inst.start();
      for (const id of gone) await b.waitGone(id, 120_000);
      const live = services.filter((s) => !gone.includes(s.id));
      for (const svc of live) {
        svc.port = (await b.waitForStatus(svc.id, 'READY', 120_000)).endpoint.port;
      }
      services.splice(0, services.length, ...live);
      for (const svc of live) await assertServes(svc);
      await assertClean(
        inst,
        b,
        live.map((s) => s.id),
      );
      await b.stop();
    });

    await t.test('a second Basin on the same data directory is refused', async () => {
      const b = await inst.start();
      const second = inst.launch();
      const exit = await second.exited;
      assert.equal(exit.code, 1, second.tail());
      assert.match(second.output(), /data directory .* is in use by another Basin \(pid \d+\)/);
      // The first one is untouched and still serves.
      assert.equal((await b.call('GET', b.servicePath(services[0]!.id))).body.status, 'READY');
      await b.stop();
    });

    await t.test('a converge that changes nothing keeps the certificate', async () => {
      const b = await inst.start();
      const svc = services[0]!;
      const path = b.servicePath(svc.id);
      const serial = certSerial(root, svc.id);
      const settle = async (res: { status: number; text: string }, status = 'READY') => {
        assert.ok(res.status >= 200 && res.status < 300, `${res.status} ${res.text}`);
        await b.waitForStatus(svc.id, status, 120_000);
      };
      await settle(
        await b.call('POST', `${path}/updatePassword`, { password: 'a-new-password-123' }),
      );
      svc.password = 'a-new-password-123';
      await settle(await b.call('POST', `${path}/setEnvironment`, { environment: 'PROD' }));
      await settle(await b.call('POST', `${path}/stop`), 'PAUSED');
      await settle(await b.call('POST', `${path}/start`));
      await b.stop();
      const again = await inst.start();
      await again.waitForStatus(svc.id, 'READY');
      await assertServes(svc);
      assert.equal(certSerial(root, svc.id), serial);
      await again.stop();
    });
  },
);
