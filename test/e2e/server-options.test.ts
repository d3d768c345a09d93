// What only the shipped program does, so only it can prove: `node
// dist/main.js` bootstraps an empty data directory and prints its credential
// once, answers --help, refuses bad configuration with exit code 2 and a
// sentence, and serves HTTPS with a generated certificate. Sim driver: no
// databases are needed for any of it.

import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { join } from 'node:path';
import { test } from 'node:test';
import type { TLSSocket } from 'node:tls';
import { OPTIONS } from '../../src/config.js';
import { API_KEY } from '../helpers.js';
import { installation } from './basin-process.js';

const basic = (user: string, secret: string) =>
  `Basic ${Buffer.from(`${user}:${secret}`).toString('base64')}`;

/** A GET over TLS that trusts only `ca`. */
function httpsGet(
  url: string,
  ca: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: string; protocol: string | null }> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(url, { ca, headers }, (res) => {
      const protocol = (res.socket as TLSSocket).getProtocol();
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, protocol }));
    });
    req.on('error', reject);
    req.end();
  });
}

test(
  'the first start prints a working credential once; later starts print none',
  { timeout: 120_000 },
  async (t) => {
    const inst = await installation(t, { driver: 'sim' });
    const first = await inst.start({ bootstrapKey: null });
    const printed = first.printed;
    assert.ok(printed?.bearerKey, `a printed credential in:\n${first.output()}`);
    assert.match(printed.bearerKey, /^bsn_/);
    // The harness reached the API with the printed bearer key; Basic works too.
    const viaBasic = await first.request('GET', '/projects', {
      authorization: basic(printed.accessKey, printed.secretKey),
    });
    assert.equal(viaBasic.status, 200, viaBasic.text);
    assert.deepEqual(viaBasic.body, [{ id: first.projectId, name: 'default' }]);
    assert.deepEqual(await first.stop(), { code: 0, signal: null });

    const again = await inst.start({ bootstrapKey: null, bearerKey: printed.bearerKey });
    assert.equal(again.projectId, first.projectId);
    assert.equal(again.printed, undefined);
    assert.doesNotMatch(again.output(), /bootstrapped|Secret key/);
  },
);

test(
  '--help lists every option; a bad option exits 2 with a sentence',
  { timeout: 120_000 },
  async (t) => {
    const inst = await installation(t, { driver: 'sim' });
    const help = inst.launch({ args: ['--help'] });
    assert.deepEqual(await help.exited, { code: 0, signal: null });
    for (const option of Object.values(OPTIONS)) {
      assert.ok(help.output().includes(option.flag), `--help lists ${option.flag}`);
      assert.ok(help.output().includes(option.env), `--help lists ${option.env}`);
    }

    const bad = inst.launch({ args: ['--driver', 'nope'] });
    assert.deepEqual(await bad.exited, { code: 2, signal: null });
    assert.equal(bad.output(), 'basin: BASIN_DRIVER must be local, hosts or sim; got nope.\n');
    assert.equal(existsSync(inst.dataDir), false, 'nothing is created for a bad configuration');
  },
);

test(
  '--tls-self-signed serves the API over HTTPS with a certificate in the data directory',
  { timeout: 120_000 },
  async (t) => {
    const inst = await installation(t, { driver: 'sim' });
    const proc = inst.launch({ args: ['--tls-self-signed'] });
    const url = `https://127.0.0.1:${inst.apiPort}/v1/projects`;
    const certFile = join(inst.dataDir, 'tls/api-cert.pem');
    const auth = { authorization: `Bearer ${API_KEY}` };
    const deadline = Date.now() + 60_000;
    let ok: Awaited<ReturnType<typeof httpsGet>> | undefined;
    while (!ok) {
      assert.ok(Date.now() < deadline, `no HTTPS answer; Basin said:\n${proc.tail()}`);
      try {
        if (existsSync(certFile)) ok = await httpsGet(url, readFileSync(certFile, 'utf8'), auth);
      } catch {
        // not listening yet
      }
      if (!ok) await new Promise((r) => setTimeout(r, 25));
    }
    const ca = readFileSync(certFile, 'utf8');
    assert.equal(ok.status, 200, ok.body);
    assert.match(ok.protocol ?? '', /^TLSv1\.[23]$/);
    assert.equal(JSON.parse(ok.body).length, 1);
    assert.equal((await httpsGet(url, ca)).status, 401);
    // A client that does not trust the certificate refuses it; plain HTTP gets no API.
    await assert.rejects(fetch(url, { headers: auth }));
    await assert.rejects(fetch(url.replace('https:', 'http:'), { headers: auth }));
    proc.signal('SIGTERM');
    assert.deepEqual(await proc.exited, { code: 0, signal: null });
  },
);
