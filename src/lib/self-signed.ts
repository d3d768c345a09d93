// A self-signed certificate for development HTTPS, made once with openssl and
// kept in the data directory. Production deployments pass their own.

import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export function selfSignedCertificate(
  dataDir: string,
  host: string,
): { cert: string; key: string } {
  const dir = join(dataDir, 'tls');
  const cert = join(dir, 'api-cert.pem');
  const key = join(dir, 'api-key.pem');
  if (!existsSync(cert) || !existsSync(key)) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    chmodSync(dir, 0o700); // mkdir's mode is filtered by the umask, and ignored for an existing directory
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-days',
        '825',
        '-subj',
        `/CN=${host}`,
        '-addext',
        `subjectAltName=DNS:${host},DNS:localhost,IP:127.0.0.1`,
        '-keyout',
        key,
        '-out',
        cert,
      ],
      { stdio: 'ignore' },
    );
    chmodSync(key, 0o600);
    chmodSync(cert, 0o600);
  }
  return { cert: readFileSync(cert, 'utf8'), key: readFileSync(key, 'utf8') };
}
