// Hosts joining an installation, on the namespace topology (topology.sh):
// three `basin host run` agents, each in a network namespace of its own with
// an address that exists only there, join a control plane (`dist/main.js
// --host-listen`, PostgreSQL store) in the root namespace with one-time
// tokens, report, and answer only the control plane. What a stranger, a
// reused token, a wrong CA and a removed host get is refused.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { httpsJson } from '../../src/lib/https-json.js';
import { type Agent, cluster, until } from './cluster.js';

const PREFIX = 'bhj';
/** The topology's subnet, 10.231.1.0/24: its own, as the tests run in parallel. */
const NET = 1;

test(
  'hosts join with one-time tokens over mutual TLS, report, and answer only the control plane',
  { timeout: 300_000 },
  async (t) => {
    const c = await cluster(t, { prefix: PREFIX, net: NET, hosts: 3, driver: 'sim' });
    const { b, cli, address, controlPlane, token, joinArgs } = c;
    const dirs = mkdtempSync(join(tmpdir(), 'basin-hosts-'));
    t.after(() => rmSync(dirs, { recursive: true, force: true }));
    const hosts = async (lostAfter = 15) =>
      JSON.parse(await cli('host', 'list', '--json', '--lost-after', String(lostAfter))) as {
        id: string;
        name: string;
        address: string;
        zone: string;
        state: string;
        cpus: number;
        heartbeat_at: string;
      }[];
    // `dir` 'host' is the host's own data directory; another name, a fresh one.
    const runAgent = (i: number, dir: string, args: string[], port = 9444): Agent =>
      c.runAgent(i, {
        dataDir: dir === 'host' ? undefined : join(dirs, dir),
        args,
        port,
        zone: i === 3 ? 'b' : 'a',
      });

    // Three hosts join, each with a token of its own.
    const tokens = await Promise.all([token(), token(), token()]);
    for (const i of [1, 2, 3]) runAgent(i, 'host', joinArgs(tokens[i - 1] as (typeof tokens)[0]));
    await until(async () => (await hosts()).filter((h) => h.state === 'ONLINE').length === 3);
    // An agent serves once its local driver has started (its template built).
    for (const name of ['h1', 'h2', 'h3']) {
      await until(
        async () => (await c.inst.cli('--store-url', c.url, 'host', 'check', name)).code === 0,
        120_000,
      );
    }
    const listed = await hosts();
    assert.deepEqual(
      listed.map((h) => [h.name, h.address, h.zone, h.state]),
      [
        ['h1', address(1), 'a', 'ONLINE'],
        ['h2', address(2), 'a', 'ONLINE'],
        ['h3', address(3), 'b', 'ONLINE'],
      ],
    );
    assert.ok(listed.every((h) => h.cpus >= 1));
    // Its key never leaves the host, and only root reads it.
    assert.equal(statSync(join(c.host(1).dataDir, 'tls', 'host.key')).mode & 0o777, 0o600);

    // The control plane calls an agent with its certificate (mutual TLS).
    const h2 = listed[1] as (typeof listed)[0];
    const checked = JSON.parse(await cli('host', 'check', 'h2', '--json')) as { host_id: string };
    assert.equal(checked.host_id, h2.id);

    // Nobody else may: not a client without a certificate (the handshake fails),
    // not another host with its own certificate from the same CA.
    await assert.rejects(
      httpsJson(`https://${address(2)}:9444/v1/agent/health`, { timeoutMs: 5000 }),
    );
    const read = (f: string) => readFileSync(join(c.host(1).dataDir, 'tls', f), 'utf8');
    const asHost1 = await httpsJson(`https://${address(2)}:9444/v1/agent/health`, {
      ca: read('ca.crt'),
      cert: read('host.crt'),
      key: read('host.key'),
      peerCn: `host:${h2.id}`,
    });
    assert.equal(asHost1.status, 403, asHost1.text);
    assert.equal((asHost1.body as { code: string }).code, 'FORBIDDEN');
    // A heartbeat without a host's certificate is refused.
    const stranger = await httpsJson(`${controlPlane}/v1/hosts/heartbeat`, {
      body: {
        capacity: { cpus: 1, memory_bytes: 1, disk_bytes: 1 },
        usage: { memory_free_bytes: 1, disk_free_bytes: 1, load1: 0 },
      },
    });
    assert.equal(stranger.status, 401, stranger.text);

    // A token joins one host; a wrong CA hash is refused before anything is sent.
    const reused = runAgent(3, 'again', joinArgs(tokens[0] as (typeof tokens)[0]), 9445);
    assert.notEqual(await reused.exited, 0);
    assert.match(reused.output(), /used already/);
    const wrongCa = runAgent(
      3,
      'wrong-ca',
      joinArgs({ ...(await token()), ca_sha256: 'ab'.repeat(32) }),
      9446,
    );
    assert.notEqual(await wrongCa.exited, 0);
    assert.match(wrongCa.output(), /does not present the CA/);
    assert.equal((await hosts()).length, 3);

    // A host killed with kill -9 stops reporting and is LOST; run again without
    // a token, it is the same host (its identity is kept) and reports again.
    const first = c.agents[0] as Agent;
    first.child.kill('SIGKILL');
    execFileSync('bash', ['-c', `kill -9 $(ip netns pids ${PREFIX}-h1) 2>/dev/null || true`]);
    await until(async () => (await hosts(1)).find((h) => h.name === 'h1')?.state === 'LOST');
    const lostAt = (await hosts()).find((h) => h.name === 'h1')?.heartbeat_at as string;
    runAgent(1, 'host', []);
    await until(async () => {
      const h1 = (await hosts(1)).find((h) => h.name === 'h1');
      return h1?.state === 'ONLINE' && h1.heartbeat_at > lostAt;
    });
    assert.equal((await hosts()).find((h) => h.name === 'h1')?.id, listed[0]?.id);

    // A removed host's certificate is refused from then on.
    await cli('host', 'remove', 'h3');
    const third = c.agents[2] as Agent;
    await until(async () => /refused the heartbeat/.test(third.output()));
    assert.deepEqual(
      (await hosts()).map((h) => h.name),
      ['h1', 'h2'],
    );

    assert.equal((await b.stop()).code, 0);
  },
);
