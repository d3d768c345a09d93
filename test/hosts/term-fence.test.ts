// A host agent refuses a deposed leader's calls (src/agent/term-fence.ts):
// the agent's own listener, with real mutual TLS, and the term kept on
// disk across a restart of the agent.

import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { serveAgent } from '../../src/agent/agent-server.js';
import { TermFence } from '../../src/agent/term-fence.js';
import { CONTROL_PLANE_CN, hostCertCn, LEADER_TERM_HEADER } from '../../src/domain/hosts.js';
import { httpsJson } from '../../src/lib/https-json.js';
import { makeCa, makeKeyAndRequest, signRequest } from '../../src/lib/x509.js';

async function leaf(ca: Awaited<ReturnType<typeof makeCa>>, cn: string) {
  const req = await makeKeyAndRequest(cn);
  return {
    key: req.key,
    cert: await signRequest(ca, req.csr, { cn, names: ['127.0.0.1'], days: 1 }),
  };
}

test('a host agent refuses a call of a lower term than the highest it has heard, across its restart', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'basin-term-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const ca = await makeCa('term test CA');
  const host = await leaf(ca, hostCertCn('h1'));
  const me = await leaf(ca, CONTROL_PLANE_CN);
  const id = {
    hostId: 'h1',
    name: 'h1',
    role: 'database' as const,
    controlPlane: 'https://127.0.0.1:1',
    ca: ca.cert,
    ...host,
  };
  let ran = 0;
  const routes = {
    'POST /v1/agent/driver': async () => {
      ran++;
      return { status: 200, body: { result: 'done' } };
    },
  };
  const serve = () => serveAgent(id, { host: '127.0.0.1', port: 0 }, routes, new TermFence(dir));
  let agent = await serve();
  t.after(() => agent.close());
  const call = (term?: string) =>
    httpsJson(`https://127.0.0.1:${agent.port}/v1/agent/driver`, {
      body: { method: 'x', args: [] },
      ca: ca.cert,
      cert: me.cert,
      key: me.key,
      peerCn: hostCertCn('h1'),
      ...(term === undefined ? {} : { headers: { [LEADER_TERM_HEADER]: term } }),
    });

  assert.equal((await call('4')).status, 200);
  assert.equal((await call('4')).status, 200, 'the same term again');
  assert.equal((await call()).status, 200, 'no term: a follower reading');
  assert.equal(readFileSync(join(dir, 'leader-term'), 'utf8'), '4\n');
  const old = await call('3');
  assert.equal(old.status, 409);
  assert.deepEqual(old.body, {
    code: 'FENCED',
    message: 'Term 3 no longer leads: this host has heard from term 4.',
  });
  assert.equal((await call('zero')).status, 409, 'not a term');
  assert.equal(ran, 3, 'refused calls never ran');

  // The agent restarts: it remembers term 4.
  await agent.close();
  agent = await serve();
  assert.equal((await call('3')).status, 409);
  assert.equal((await call('5')).status, 200);
  assert.equal((await call('4')).status, 409);
  assert.equal(ran, 4);
});
