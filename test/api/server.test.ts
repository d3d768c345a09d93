// A real listening server, over plain HTTP on loopback and over TLS with a
// self-signed certificate: what a client on the network sees.

import assert from 'node:assert/strict';
import { request as httpsRequest } from 'node:https';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import type { TLSSocket } from 'node:tls';
import { selfSignedCertificate } from '../../src/lib/self-signed.js';
import { API_KEY, startBasin, tempDir } from '../helpers.js';

function baseUrl(address: AddressInfo, scheme: 'http' | 'https'): string {
  return `${scheme}://127.0.0.1:${address.port}`;
}

test('a listening server answers over HTTP with the API and its OpenAPI document', async (t) => {
  const b = await startBasin(t);
  await b.basin.app.listen({ port: 0, host: '127.0.0.1' });
  const base = baseUrl(b.basin.app.server.address() as AddressInfo, 'http');

  const ok = await fetch(`${base}/v1/projects`, {
    headers: { authorization: `Bearer ${API_KEY}` },
  });
  assert.equal(ok.status, 200);
  assert.match(ok.headers.get('content-type') ?? '', /^application\/json/);
  assert.deepEqual(await ok.json(), [{ id: b.projectId, name: 'default' }]);

  const denied = await fetch(`${base}/v1/projects`);
  assert.equal(denied.status, 401);
  assert.match(denied.headers.get('content-type') ?? '', /^application\/json/);
  const error = (await denied.json()) as { code: string; message: string };
  assert.equal(error.code, 'UNAUTHORIZED');
  assert.match(error.message, /Bearer/);

  // A body sent by a real client, chunked, through the whole stack.
  const created = await fetch(`${base}/v1/projects/${b.projectId}/vpcs`, {
    method: 'POST',
    headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'net', cidr: '10.0.0.0/16', region_code: 'us-east-1' }),
  });
  assert.equal(created.status, 201);
  const vpc = (await created.json()) as { id: string; name: string };
  assert.equal(vpc.name, 'net');
  const deleted = await fetch(`${base}/v1/projects/${b.projectId}/vpcs/${vpc.id}`, {
    method: 'DELETE',
    headers: { authorization: `Bearer ${API_KEY}` },
  });
  assert.equal(deleted.status, 204);
  assert.equal(await deleted.text(), '');

  const doc = await fetch(`${base}/v1/openapi.json`);
  assert.equal(doc.status, 200);
  const openapi = (await doc.json()) as { openapi: string; paths: Record<string, unknown> };
  assert.match(openapi.openapi, /^3\./);
  const logs = openapi.paths['/v1/projects/{project_id}/services/{service_id}/logs'] as
    { get?: unknown } | undefined;
  assert.ok(logs?.get, `logs path in ${Object.keys(openapi.paths).join(', ')}`);
  for (const path of [
    '/v1/projects',
    '/v1/projects/{project_id}/vpcs',
    '/v1/projects/{project_id}/vpcs/{vpc_id}/peerings/{peering_id}',
    '/v1/projects/{project_id}/services/{service_id}/replicaSets/{replica_set_id}/resize',
  ]) {
    assert.ok(openapi.paths[path], `${path} is documented`);
  }
});

/** A GET over TLS that trusts only `ca` (the self-signed certificate). */
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
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          body,
          protocol,
        }),
      );
    });
    req.on('error', reject);
    req.end();
  });
}

test('with a self-signed certificate the server serves the API over TLS', async (t) => {
  const tls = selfSignedCertificate(tempDir(t, 'basin-tls-'), 'localhost');
  assert.match(tls.cert, /BEGIN CERTIFICATE/);
  const b = await startBasin(t, { options: { https: tls } });
  await b.basin.app.listen({ port: 0, host: '127.0.0.1' });
  const base = baseUrl(b.basin.app.server.address() as AddressInfo, 'https');

  // The certificate is valid for 127.0.0.1: trusting it alone is enough.
  const ok = await httpsGet(`${base}/v1/projects`, tls.cert, {
    authorization: `Bearer ${API_KEY}`,
  });
  assert.equal(ok.status, 200);
  assert.match(ok.protocol ?? '', /^TLSv1\.[23]$/);
  assert.deepEqual(JSON.parse(ok.body), [{ id: b.projectId, name: 'default' }]);

  const denied = await httpsGet(`${base}/v1/projects`, tls.cert);
  assert.equal(denied.status, 401);
  assert.equal(JSON.parse(denied.body).code, 'UNAUTHORIZED');

  // A client that does not trust the certificate refuses the connection.
  await assert.rejects(fetch(`${base}/v1/projects`), 'an untrusted self-signed certificate');
  // And plain HTTP to the TLS port gets no API answer.
  await assert.rejects(
    fetch(`http://127.0.0.1:${(b.basin.app.server.address() as AddressInfo).port}/v1/projects`, {
      headers: { authorization: `Bearer ${API_KEY}` },
    }),
  );
});
