import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { X509Certificate, createPrivateKey, createPublicKey } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { selfSignedCertificate } from './self-signed.js';

const run = promisify(execFile);

function matches(pair: { cert: string; key: string }): boolean {
  const fromCert = new X509Certificate(pair.cert).publicKey.export({ type: 'spki', format: 'pem' });
  const fromKey = createPublicKey(createPrivateKey(pair.key)).export({
    type: 'spki',
    format: 'pem',
  });
  return fromCert === fromKey;
}

test('self-signed: Basins starting together on one data directory all read the one pair that won', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'basin-tls-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const script = `import { selfSignedCertificate } from ${JSON.stringify(new URL('./self-signed.ts', import.meta.url).pathname)};
    process.stdout.write(JSON.stringify(selfSignedCertificate(${JSON.stringify(dir)}, 'localhost')));`;
  const outs = await Promise.all(
    [1, 2, 3, 4].map(() =>
      run(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script]),
    ),
  );
  const pairs = outs.map((o) => JSON.parse(o.stdout) as { cert: string; key: string });
  for (const pair of pairs) {
    assert.equal(pair.cert, pairs[0]?.cert);
    assert.equal(pair.key, pairs[0]?.key);
  }
  assert.ok(matches(pairs[0] as { cert: string; key: string }), 'the key is the certificate’s');
  assert.deepEqual(readdirSync(dir), ['tls'], 'no staging directory left');
  assert.deepEqual(selfSignedCertificate(dir, 'localhost'), pairs[0], 'kept across starts');
});

test('self-signed: a tls directory an older Basin left incomplete is replaced', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'basin-tls-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  mkdirSync(join(dir, 'tls'));
  writeFileSync(join(dir, 'tls', 'api-key.pem'), 'half');
  const pair = selfSignedCertificate(dir, 'localhost');
  assert.ok(matches(pair));
});
