import assert from 'node:assert/strict';
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { test } from 'node:test';
import { certCn, certSha256, makeCa, makeKeyAndRequest, signRequest } from './x509.js';

test('signRequest names the subject it is given, whatever the request asked for', async () => {
  const ca = await makeCa('test CA');
  const { csr } = await makeKeyAndRequest('root');
  const cert = await signRequest(ca, csr, { cn: 'basin-service-x', names: [], days: 1 });
  assert.equal(certCn(cert), 'basin-service-x');
  assert.ok(new X509Certificate(cert).verify(new X509Certificate(ca.cert).publicKey));
  // A certificate already parsed (a TLS peer's) reads the same as its PEM.
  const x = new X509Certificate(cert);
  assert.equal(certCn(x), 'basin-service-x');
  assert.equal(certSha256(x), certSha256(cert));
  assert.match(certSha256(cert), /^[0-9a-f]{64}$/);
});

test('signRequest with cn null gives a client certificate without a CN, even for a request that named one', async () => {
  const ca = await makeCa('test CA');
  const { key, csr } = await makeKeyAndRequest('root');
  const cert = await signRequest(ca, csr, { cn: null, names: [], days: 1, use: 'client' });
  const x = new X509Certificate(cert);
  assert.equal(certCn(cert), undefined);
  assert.equal(x.subject, 'O=Basin');
  assert.deepEqual(x.keyUsage, ['1.3.6.1.5.5.7.3.2']); // clientAuth only
  assert.ok(x.verify(new X509Certificate(ca.cert).publicKey));
  assert.ok(x.checkPrivateKey(createPrivateKey(key)));
});
