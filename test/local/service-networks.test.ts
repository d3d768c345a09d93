// The services' network namespaces against the real kernel (as root),
// without PostgreSQL: a namespace per id with its /31 pair, a host port
// translated into it (from this host's loopback, arriving from the
// namespace's gateway), a host-side port reserved for one namespace
// (reached from it and from the host, reset for another namespace), the
// same pairs after a restart, a local client redirected at connect and not
// tracked (and translated without the redirect, tracked), a port parked on
// the namespace's host side and back, a deleted id's namespace swept at
// start, a
// freed pair given again, and a block that collides with the host's
// routes refused. Everything is removed afterwards (cleanUpDataDir).

import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import { connect, createServer, type Server } from 'node:net';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { HostCheckError } from '../../src/drivers/local/errors.js';
import { Layout } from '../../src/drivers/local/layout.js';
import { removeConnectRedirect } from '../../src/drivers/local/network/connect-redirect.js';
import { ServiceNetworks } from '../../src/drivers/local/network/service-networks.js';
import { silentLogger } from '../../src/lib/logger.js';
import { ensureInstallation } from '../../src/drivers/local/host/service-users.js';
import { serviceNetwork } from '../e2e/basin-process.js';
import { claimPortBlock } from '../harness/port-block.js';
import { dataDirFor } from './helpers.js';

const run = promisify(execFile);

/** Connects from `netns` (or the host) to address:port; what the client saw first. */
async function connectFrom(netns: string | undefined, address: string, port: number) {
  const script = `exec 3<>/dev/tcp/${address}/${port} && head -c 64 <&3`;
  const [file, ...args] = netns
    ? ['nsenter', `--net=${netns}`, '--', 'bash', '-c', script]
    : ['bash', '-c', script];
  try {
    const { stdout } = await run(file as string, args, { timeout: 10_000 });
    return stdout.trim();
  } catch (err) {
    return `refused: ${(err as { stderr?: string }).stderr ?? String(err)}`;
  }
}

/** Connects from this process to 127.0.0.1:`port`: the socket's peer address, and what the server said. */
function connectHere(port: number): Promise<{ peer: string | undefined; said: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port });
    let said = '';
    let peer: string | undefined;
    socket.setEncoding('utf8');
    socket.on('connect', () => (peer = socket.remoteAddress));
    socket.on('data', (d: string) => (said += d));
    socket.on('error', reject);
    socket.on('close', () => resolve({ peer, said: said.trim() }));
  });
}

/** A server on `host`:`port` (0: any) that tells each client its address. */
async function teller(host: string, port = 0): Promise<{ server: Server; port: number }> {
  const server = createServer((s) => s.end(`you are ${s.remoteAddress}\n`));
  await new Promise<void>((resolve) => server.listen({ host, port }, resolve));
  return { server, port: (server.address() as { port: number }).port };
}

test('namespaces, their ports and reserved host ports, against the kernel', async (t) => {
  const dataDir = dataDirFor(t);
  const block = await claimPortBlock();
  t.after(() => block.release());
  const cidr = serviceNetwork(block.claimed);
  const layout = new Layout(dataDir);
  mkdirSync(layout.instancesDir, { recursive: true });
  const installation = await ensureInstallation(layout);
  const start = () =>
    ServiceNetworks.start({ layout, installation, mode: cidr, log: silentLogger });

  const networks = await start();
  assert.ok(networks.enabled);
  const a = await networks.ensure('svca');
  const b = await networks.ensure('svcb');
  const base = cidr.replace(/0\/24$/, '');
  assert.deepEqual(
    [a.hostAddress, a.address, b.hostAddress, b.address],
    [`${base}0`, `${base}1`, `${base}2`, `${base}3`],
  );
  assert.equal(a.name, `basin-${installation}-svca`);
  assert.equal(readFileSync(`/proc/sys/net/ipv4/conf/${a.veth}/route_localnet`, 'utf8'), '1\n');

  await t.test(
    "a port of a namespace leads there from this host's loopback, from its gateway",
    async () => {
      // What listens in the namespace: bash's /dev/tcp cannot listen, so a
      // node there does (nothing of it is a tenant's).
      const inside = spawn('nsenter', [
        `--net=${a.path}`,
        '--',
        process.execPath,
        '-e',
        `require('net').createServer((s) => s.end('inside, you are ' + s.remoteAddress + '\\n')).listen(${block.apiPort}, '0.0.0.0')`,
      ]);
      t.after(() => inside.kill('SIGKILL'));
      await networks.forward('svca', { ports: [block.apiPort] });
      let seen = '';
      for (let i = 0; i < 100 && !seen.startsWith('inside'); i++) {
        seen = await connectFrom(undefined, '127.0.0.1', block.apiPort);
        if (!seen.startsWith('inside')) await new Promise((r) => setTimeout(r, 50));
      }
      assert.equal(seen, `inside, you are ${a.hostAddress}`);
      // From the other namespace, through the host: its own address is kept.
      assert.equal(
        await connectFrom(b.path, b.hostAddress, block.apiPort),
        `inside, you are ${b.address}`,
      );
      // Not to the namespace's address, untranslated: the host forwards
      // into a namespace only what it translated there (tracked or not).
      assert.match(await connectFrom(b.path, a.address, block.apiPort), /^refused/);
      // A client on this host is given the namespace's address at
      // connect(2) (connect-redirect.ts): its socket's peer is that
      // address, not the loopback it asked for; the server sees the same.
      assert.match(networks.describe(), /local clients redirected at connect/);
      assert.deepEqual(await connectHere(block.apiPort), {
        peer: a.address,
        said: `inside, you are ${a.hostAddress}`,
      });
      // Such a connection needs no translation, and the host does not track
      // it (nft-table.ts, notrack_in/notrack_out): the kernel has no entry of
      // the gateway to the namespace's port (a tracked one would stay, in
      // TIME_WAIT, for two minutes).
      const direct = new RegExp(
        `src=${a.hostAddress.replace(/\./g, '\\.')} dst=${a.address.replace(/\./g, '\\.')} sport=\\d+ dport=${block.apiPort} `,
      );
      assert.doesNotMatch(readFileSync('/proc/net/nf_conntrack', 'utf8'), direct);
      // Without the program, the nftables translation serves the same
      // connection (the peer stays 127.0.0.1: translated per packet)…
      removeConnectRedirect(installation);
      assert.deepEqual(await connectHere(block.apiPort), {
        peer: '127.0.0.1',
        said: `inside, you are ${a.hostAddress}`,
      });
      // …tracked, its source masqueraded to the gateway and a port below
      // the untracked clients' (32768-65535), so its answers are translated back.
      const translated = [
        ...readFileSync('/proc/net/nf_conntrack', 'utf8').matchAll(
          new RegExp(
            `src=127\\.0\\.0\\.1 dst=127\\.0\\.0\\.1 sport=\\d+ dport=${block.apiPort} .*src=${a.address.replace(/\./g, '\\.')} dst=${a.hostAddress.replace(/\./g, '\\.')} sport=${block.apiPort} dport=(\\d+) `,
            'g',
          ),
        ),
      ].map((m) => Number(m[1]));
      assert.ok(translated.length > 0, 'the translated connection is tracked');
      assert.ok(
        translated.every((port) => port >= 1024 && port <= 32767),
        `masqueraded to ports ${translated.join(', ')}`,
      );
      // …until a start loads it again.
      const restarted = await start();
      assert.equal((await connectHere(block.apiPort)).peer, a.address);
      await restarted.forward('svca', { ports: [] });
      // The port no longer leads there once it is not the namespace's.
      await networks.forward('svca', { ports: [] });
      assert.match(await connectFrom(undefined, '127.0.0.1', block.apiPort), /^refused/);
    },
  );

  await t.test(
    "a parked port leads to the namespace's host side (a sleeping service's waker), then back",
    async () => {
      // The listener in the namespace is still there (the test above's);
      // the "waker" listens on the namespace's host side, the same port.
      const { server } = await teller(a.hostAddress, block.apiPort);
      t.after(() => server.close());
      // A fresh start: the test above took this process's redirect away.
      const nets = await start();
      await nets.forward('svca', { ports: [block.apiPort] });
      await nets.park('svca', [block.apiPort]);
      assert.deepEqual(nets.parkedIds(), ['svca']);
      // A local client, redirected at connect(2): to the host side.
      const here = await connectHere(block.apiPort);
      assert.equal(here.peer, a.hostAddress);
      assert.match(here.said, /^you are /);
      // Another client on the host, and another namespace through the host (translated): the same.
      assert.match(await connectFrom(undefined, '127.0.0.1', block.apiPort), /^you are /);
      assert.equal(await connectFrom(b.path, b.hostAddress, block.apiPort), `you are ${b.address}`);
      // The record keeps it across a restart.
      assert.deepEqual((await start()).parkedIds(), ['svca']);
      // Unparked: into the namespace again.
      await nets.park('svca', []);
      assert.deepEqual(nets.parkedIds(), []);
      assert.equal((await connectHere(block.apiPort)).said, `inside, you are ${a.hostAddress}`);
      await nets.forward('svca', { ports: [] });
    },
  );

  await t.test('a reserved host port: its namespace and the host only', async () => {
    const { server, port } = await teller(a.hostAddress);
    t.after(() => server.close());
    // Not reserved yet: any namespace reaches the host's address.
    assert.equal(await connectFrom(b.path, a.hostAddress, port), `you are ${b.address}`);
    await networks.reserveHostPorts('svca', [port]);
    assert.equal(await connectFrom(a.path, a.hostAddress, port), `you are ${a.address}`);
    assert.match(await connectFrom(undefined, a.hostAddress, port), /^you are /);
    assert.match(await connectFrom(b.path, a.hostAddress, port), /^refused: .*Connection refused/);
  });

  await t.test(
    'a restart keeps the pairs; a deleted id is swept; its pair is given again',
    async () => {
      const again = await start();
      assert.deepEqual(again.get('svca'), a);
      assert.deepEqual(again.get('svcb'), b);
      // svcb's service is gone (its instance directory) while Basin was down.
      rmSync(layout.instanceDir('svcb'), { recursive: true });
      const third = await start();
      assert.equal(third.get('svcb'), undefined);
      await assert.rejects(run('ip', ['link', 'show', 'dev', b.veth]), 'its veth is gone');
      await assert.rejects(run('ip', ['netns', 'exec', b.name, 'true']), 'its namespace is gone');
      const c = await third.ensure('svcc');
      assert.equal(c.hostAddress, b.hostAddress, 'the freed pair is given again');
      await third.remove('svca');
      await assert.rejects(run('ip', ['link', 'show', 'dev', a.veth]));
      assert.equal(third.get('svca'), undefined);
    },
  );

  await t.test("a block that collides with the host's addresses is a start error", async () => {
    const other = new Layout(dataDirFor(t));
    mkdirSync(other.instancesDir, { recursive: true });
    const tag = await ensureInstallation(other);
    // This installation's veth holds an address of the block.
    await assert.rejects(
      ServiceNetworks.start({ layout: other, installation: tag, mode: cidr, log: silentLogger }),
      (err: unknown) =>
        err instanceof HostCheckError &&
        new RegExp(
          `The service network ${cidr.replace(/\./g, '\\.')} .* collides with this host's address ${base.replace(/\./g, '\\.')}`,
        ).test((err as Error).message),
    );
  });
});
