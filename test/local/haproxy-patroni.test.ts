// A host's HAProxy for an HA service under Patroni (haproxy-patroni.ts),
// with the real HAProxy: it routes the service's port to the node whose
// REST API answers 200 to GET /primary over mutual TLS, follows a new
// primary without being told, cuts the sessions of a node marked down, and
// never routes to a node whose API presents a certificate of another CA.
// The REST APIs are stand-ins (Node HTTPS servers answering /primary as
// Patroni does, requiring a client certificate of the CA); the nodes' data
// ports answer their name. test/cluster's HA test runs real Patroni.

import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttps, type Server as HttpsServer } from 'node:https';
import { connect, createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { renderPatroniService } from '../../src/drivers/local/endpoints/haproxy-patroni.js';
import { makeCa, makeKeyAndRequest, signRequest } from '../../src/lib/x509.js';
import { freePort } from '../harness/postmaster.js';

test(
  'HAProxy routes to the node Patroni says is primary, follows a failover, trusts only the CA',
  { timeout: 120_000 },
  async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'basin-hp-haproxy-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const ca = await makeCa('test CA');
    const issue = async (caPair: typeof ca, cn: string, names: string[]) => {
      const r = await makeKeyAndRequest(cn);
      return { cert: await signRequest(caPair, r.csr, { cn, names, days: 1 }), key: r.key };
    };
    const proxyClient = await issue(ca, 'proxy', []);
    writeFileSync(join(dir, 'ca.crt'), ca.cert);
    writeFileSync(join(dir, 'proxy.pem'), `${proxyClient.cert}${proxyClient.key}`, { mode: 0o600 });

    // Three nodes: node0 primary at first; node2's API has a stranger's certificate and says primary always.
    const stranger = await makeCa('a stranger');
    const primary = { name: 'node0' };
    const servers: (Server | HttpsServer)[] = [];
    t.after(() => servers.forEach((s) => s.close()));
    const nodes = [];
    for (const i of [0, 1, 2]) {
      const name = `node${i}`;
      const data = createServer((sock) => {
        sock.on('error', () => undefined);
        sock.write(`${name}\n`);
      });
      const apiCert = await issue(i === 2 ? stranger : ca, name, ['127.0.0.1']);
      const api = createHttps(
        { ...apiCert, ca: ca.cert, requestCert: true, rejectUnauthorized: true },
        (req, res) => {
          const isPrimary = i === 2 || primary.name === name;
          res.writeHead(req.url === '/primary' && isPrimary ? 200 : 503).end();
        },
      );
      const port = await freePort();
      const apiPort = await freePort();
      await new Promise<void>((r) => data.listen(port, '127.0.0.1', r));
      await new Promise<void>((r) => api.listen(apiPort, '127.0.0.1', r));
      servers.push(data, api);
      nodes.push({ index: i, host: '127.0.0.1', port, apiPort });
    }

    const front = await freePort();
    const cfg = join(dir, 'haproxy.cfg');
    writeFileSync(
      cfg,
      [
        'global',
        '    maxconn 100',
        'defaults',
        '    mode tcp',
        '    timeout connect 2s',
        '    timeout client 30s',
        '    timeout server 30s',
        '    timeout check 1s',
        '',
        renderPatroniService('svc1', front, nodes, '127.0.0.1', ['0.0.0.0/0', '::/0'], {
          ca: join(dir, 'ca.crt'),
          crt: join(dir, 'proxy.pem'),
        }),
      ].join('\n'),
    );
    let out = '';
    const haproxy: ChildProcess = spawn('haproxy', ['-db', '-f', cfg], { stdio: ['ignore', 'pipe', 'pipe'] }); // prettier-ignore
    haproxy.stdout?.on('data', (d: Buffer) => (out += String(d)));
    haproxy.stderr?.on('data', (d: Buffer) => (out += String(d)));
    t.after(() => haproxy.kill('SIGKILL'));

    const ask = () =>
      new Promise<string>((resolve) => {
        const s = connect(front, '127.0.0.1');
        let got = '';
        s.on('data', (d) => {
          got += String(d);
          if (got.includes('\n')) {
            s.destroy();
            resolve(got.trim());
          }
        });
        s.on('error', () => resolve('error'));
        s.on('close', () => resolve(got.trim() || 'closed'));
        s.setTimeout(3000, () => s.destroy());
      });
    const until = async (want: string) => {
      const seen: string[] = [];
      for (let n = 0; n < 60; n++) {
        const got = await ask();
        seen.push(got);
        if (got === want) return;
        await sleep(250);
      }
      assert.fail(`never routed to ${want}: ${seen.slice(-5).join(', ')}\n${out}`);
    };

    await until('node0');
    // node2's API claims to be primary, but its certificate is not the CA's: never routed to.
    for (let n = 0; n < 10; n++) assert.equal(await ask(), 'node0');

    // A session held to node0 is cut when Patroni makes node1 primary; new ones go to node1.
    const held = connect(front, '127.0.0.1');
    const closed = new Promise<void>((r) => held.on('close', () => r()));
    held.on('error', () => undefined);
    await new Promise<void>((r) => held.once('data', () => r()));
    primary.name = 'node1';
    await until('node1');
    await closed;
    assert.match(out, /node0 is DOWN/);
    assert.doesNotMatch(out, /node2 is UP/);
  },
);
