// A host's HAProxy across reloads, for HA services under Patroni (issue 22,
// docs/decisions.md "HA across hosts", Endpoints): HAProxy 2.6 takes a
// server as up from the moment it loads a configuration until its checks
// fail, and `balance first` then sends a client to the first server listed,
// a standby, for a second or two. So the agent keeps the servers' states
// across each reload (haproxy.ts, server-state.ts) and a server HAProxy has
// not checked yet starts down. This drives the real HAProxy through the
// driver's own Haproxy class (spawn, seamless reload, stats socket), as the
// agent does, in front of stand-in nodes: REST APIs answering GET /primary
// as Patroni does (over mutual TLS), and data ports answering their name.
// Right after each start and reload, many connections: none may reach a
// standby. test/local/haproxy-patroni.test.ts covers routing and failover.

import assert from 'node:assert/strict';
import { chmodSync, readFileSync } from 'node:fs';
import { createServer as createHttps, type Server as HttpsServer } from 'node:https';
import { connect, createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  type PatroniServer,
  renderPatroniService,
} from '../../src/drivers/local/endpoints/haproxy-patroni.js';
import { Haproxy } from '../../src/drivers/local/endpoints/haproxy.js';
import { Layout } from '../../src/drivers/local/layout.js';
import { mkdirIn, writeRootFile } from '../../src/drivers/local/node/node-files.js';
import { silentLogger } from '../../src/lib/logger.js';
import { makeCa, makeKeyAndRequest, signRequest } from '../../src/lib/x509.js';
import { dataDirFor, freePort } from './helpers.js';

/**
 * How long connections are made after a start or reload: longer than a
 * standby taken for up would take to be marked down (its first check at
 * the worker's start, the second 500 ms later: fall 2, fastinter), which
 * is when main's code sent clients to it. A window to sample in, not a
 * bound on anything.
 */
const RIGHT_AFTER_MS = 1_500;

test(
  'right after a start or reload of HAProxy no connection reaches a standby',
  { timeout: 120_000 },
  async (t) => {
    const dataDir = dataDirFor(t);
    chmodSync(dataDir, 0o711); // HAProxy's user reads its files below
    const layout = new Layout(dataDir);
    await mkdirIn(layout.root, 0o711);
    const haproxy = new Haproxy({
      layout,
      listenAddresses: '127.0.0.1',
      log: silentLogger,
    });
    t.after(() => haproxy.destroy());

    // The checks' TLS, as patroni-endpoint.ts makes it: a CA, and a client certificate HAProxy's user reads.
    const ca = await makeCa('test CA');
    const issue = async (cn: string, names: string[]) => {
      const r = await makeKeyAndRequest(cn);
      return { cert: await signRequest(ca, r.csr, { cn, names, days: 1 }), key: r.key };
    };
    const tlsDir = join(haproxy.home, 'patroni-check');
    await mkdirIn(haproxy.home, 0o711);
    await mkdirIn(tlsDir, 0o711);
    const client = await issue('basin-haproxy', []);
    const tls = { ca: join(tlsDir, 'ca.crt'), crt: join(tlsDir, 'client.pem') };
    await writeRootFile(tls.ca, ca.cert, haproxy.osUser);
    await writeRootFile(tls.crt, `${client.cert.trim()}\n${client.key.trim()}\n`, haproxy.osUser);

    // Stand-in nodes: node1 is the primary, node0 and node2 standbys (node0 is listed first).
    const listening: (Server | HttpsServer)[] = [];
    t.after(() => listening.forEach((s) => s.close()));
    const apiCert = await issue('node', ['127.0.0.1']); // every stand-in's REST API shows it
    const node = async (index: number, answer: string, primary: boolean) => {
      const data = createServer((sock) => {
        sock.on('error', () => undefined);
        sock.end(`${answer}\n`);
      });
      const api = createHttps(
        { ...apiCert, ca: ca.cert, requestCert: true, rejectUnauthorized: true },
        (req, res) => res.writeHead(req.url === '/primary' && primary ? 200 : 503).end(),
      );
      const port = await freePort();
      const apiPort = await freePort();
      await new Promise<void>((r) => data.listen(port, '127.0.0.1', r));
      await new Promise<void>((r) => api.listen(apiPort, '127.0.0.1', r));
      listening.push(data, api);
      return { index, host: '127.0.0.1', port, apiPort } satisfies PatroniServer;
    };
    const standby0 = await node(0, 'standby node0', false);
    const primary1 = await node(1, 'primary node1', true);
    const standby2 = await node(2, 'standby node2', false);

    const ensure = async (id: string, port: number, servers: PatroniServer[]) => {
      const text = renderPatroniService(id, port, servers, '127.0.0.1', ['0.0.0.0/0', '::/0'], tls);
      await haproxy.ensurePatroniService(id, text);
    };
    const ask = (port: number) =>
      new Promise<string>((resolve) => {
        const s = connect(port, '127.0.0.1');
        let got = '';
        s.on('data', (d) => (got += String(d)));
        s.on('error', () => undefined);
        s.on('close', () => resolve(got.trim() || 'no answer'));
        s.setTimeout(3000, () => s.destroy());
      });
    /**
     * Many connections one after another: each must reach the primary (the
     * Haproxy class resolves once the new worker routes the port). What
     * went elsewhere is noted, and the test fails at its end with every
     * phase that let a connection go to a standby or get no answer.
     */
    const wrongs: string[] = [];
    const rightAfter = async (what: string, port: number) => {
      const seen: string[] = [];
      for (const end = Date.now() + RIGHT_AFTER_MS; Date.now() < end || seen.length < 10;) {
        seen.push(await ask(port));
        await sleep(20);
      }
      const wrong = seen.filter((a) => a !== 'primary node1');
      if (wrong.length > 0) wrongs.push(`${what}: ${wrong.length} of ${seen.length}: ${wrong[0]}`);
    };

    // HAProxy's first start (nothing ran before): every server starts
    // down and is up once its first check passes, which ensure waits for;
    // the standby listed first is never taken for up meanwhile.
    const portA = await freePort();
    await ensure('svca', portA, [standby0, primary1]);
    await rightAfter('svca right after HAProxy started', portA);

    // Another service's frontend added: a reload. svca's servers keep the
    // states checked before it; the new frontend's start down (and ensure
    // returns once its primary is up).
    const portB = await freePort();
    await ensure('svcb', portB, [standby0, primary1]);
    const reloaded = rightAfter('svca right after a reload', portA);
    await rightAfter('svcb, new, right after the reload', portB);
    await reloaded;

    // A node added to svcb (listed after the primary), a third service,
    // then a node added to it listed first: two reloads before svca and
    // svcb are asked, one right before svcc is; the primary stays up, a
    // new standby starts down.
    const portC = await freePort();
    await ensure('svcb', portB, [standby0, primary1, standby2]);
    await ensure('svcc', portC, [primary1, standby2]);
    await Promise.all([
      rightAfter('svca after two reloads', portA),
      rightAfter('svcb with a node added', portB),
    ]);
    await ensure('svcc', portC, [standby0, primary1, standby2]);
    await rightAfter('svcc with node0 added first', portC);

    // A node that moved (another address or port) is checked anew where it
    // is now, never at the one the state was saved for: the new standby at
    // node0's name starts down too.
    const moved = await node(0, 'standby node0 moved', false);
    await ensure('svca', portA, [moved, primary1]);
    await rightAfter('svca after node0 moved', portA);

    // A service removed: a reload too.
    await haproxy.removeService('svcc');
    await Promise.all([
      rightAfter('svca after svcc was removed', portA),
      rightAfter('svcb after svcc was removed', portB),
    ]);
    assert.deepEqual(
      wrongs,
      [],
      `connections led elsewhere than the primary; HAProxy's log:\n${readFileSync(join(haproxy.home, 'haproxy.log'), 'utf8')}`,
    );
  },
);
