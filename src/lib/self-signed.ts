// A self-signed certificate for development HTTPS, made once with openssl and
// kept in the data directory. Production deployments pass their own.

import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Several Basins may share a data directory (a PostgreSQL store) and start
 * together: the pair is made in a directory of this process's and published
 * by renaming that directory to `tls`, so every process reads the one pair
 * that won, whole, and never a key of one with a certificate of another.
 */
export function selfSignedCertificate(
  dataDir: string,
  host: string,
): { cert: string; key: string } {
  const dir = join(dataDir, 'tls');
  const cert = join(dir, 'api-cert.pem');
  const key = join(dir, 'api-key.pem');
  if (!existsSync(cert) || !existsSync(key)) {
    const staging = join(dataDir, `tls.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
    try {
      mkdirSync(staging, { mode: 0o700 });
      chmodSync(staging, 0o700); // mkdir's mode is filtered by the umask
      generate(host, join(staging, 'api-cert.pem'), join(staging, 'api-key.pem'));
      // A `tls` left incomplete by an older Basin killed mid-way goes first.
      if (existsSync(dir) && !(existsSync(cert) && existsSync(key))) {
        rmSync(dir, { recursive: true, force: true });
      }
      try {
        renameSync(staging, dir);
      } catch (err) {
        // Another Basin published its pair first: that one is used.
        const code = (err as NodeJS.ErrnoException).code;
        if (code !== 'ENOTEMPTY' && code !== 'EEXIST') throw err;
      }
    } finally {
      rmSync(staging, { recursive: true, force: true });
    }
  }
  return { cert: readFileSync(cert, 'utf8'), key: readFileSync(key, 'utf8') };
}

function generate(host: string, cert: string, key: string): void {
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
