// Certificates for the mutual TLS between the control plane and its hosts:
// a CA, keys with signing requests, and requests signed by the CA. openssl
// does the work (Node parses certificates but cannot issue them), in a
// private temporary directory removed afterwards; keys are P-256.

import { execFile } from 'node:child_process';
import { randomBytes, X509Certificate } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { isIP } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const execFileP = promisify(execFile);

export interface KeyPair {
  cert: string;
  key: string;
}

/** A new CA: `cn` names it; ten years; `pathlen` CAs may stand under it (0: none). */
export async function makeCa(cn: string, pathlen = 0): Promise<KeyPair> {
  return inScratch(async (dir) => {
    const cnf = join(dir, 'ca.cnf');
    await writeFile(
      cnf,
      [
        '[req]',
        'distinguished_name = dn',
        'prompt = no',
        'x509_extensions = v3_ca',
        '[dn]',
        `CN = ${safeCn(cn)}`,
        '[v3_ca]',
        `basicConstraints = critical,CA:TRUE,pathlen:${pathlen}`,
        'keyUsage = critical,keyCertSign,cRLSign',
        'subjectKeyIdentifier = hash',
        '',
      ].join('\n'),
    );
    await openssl([
      'req', '-x509', '-new', '-config', cnf, '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256',
      '-nodes', '-sha256', '-days', '3650', '-set_serial', serial(),
      '-keyout', join(dir, 'ca.key'), '-out', join(dir, 'ca.crt'),
    ]); // prettier-ignore
    return {
      cert: await readFile(join(dir, 'ca.crt'), 'utf8'),
      key: await readFile(join(dir, 'ca.key'), 'utf8'),
    };
  });
}

/** A new key and a signing request for `cn` (the signer decides the names and uses). */
export async function makeKeyAndRequest(cn: string): Promise<{ key: string; csr: string }> {
  return inScratch(async (dir) => {
    await openssl([
      'req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
      '-subj', `/CN=${safeCn(cn)}`, '-keyout', join(dir, 'req.key'), '-out', join(dir, 'req.csr'),
    ]); // prettier-ignore
    return {
      key: await readFile(join(dir, 'req.key'), 'utf8'),
      csr: await readFile(join(dir, 'req.csr'), 'utf8'),
    };
  });
}

export interface SignOptions {
  /**
   * The subject's CN, whatever the request asked for; null for a subject
   * with no CN at all (`O=Basin`): a certificate that only opens TLS, for a
   * peer that refuses a CN (etcd 3.4's JSON gateway with auth on, which
   * Patroni speaks: docs/decisions.md, "etcd on the hosts").
   */
  cn: string | null;
  /** IP addresses and DNS names it is valid for. */
  names: readonly string[];
  days: number;
  /** A CA under `ca` (that issues leaves only), instead of a leaf. */
  ca?: boolean;
  /**
   * A leaf for one end only (its one extended key usage), so that it never
   * passes for the other; both unless given.
   */
  use?: 'server' | 'client';
}

/**
 * Signs `csr` with `ca`: a leaf for both ends of a TLS connection (server and
 * client), with the subject and names given here. Only the request's key is
 * taken from it: a requester cannot choose its name or make itself a CA.
 * Throws when `csr` is not a valid request.
 */
export async function signRequest(ca: KeyPair, csr: string, o: SignOptions): Promise<string> {
  return inScratch(async (dir) => {
    const f = (name: string) => join(dir, name);
    await writeFile(f('ca.crt'), ca.cert);
    await writeFile(f('ca.key'), ca.key, { mode: 0o600 });
    await writeFile(f('req.csr'), csr);
    const san = o.names.map((n) => (isIP(n) ? `IP:${n}` : `DNS:${safeCn(n)}`)).join(',');
    await writeFile(
      f('ext.cnf'),
      [
        '[v3]',
        ...(o.ca
          ? [
              'basicConstraints = critical,CA:TRUE,pathlen:0',
              'keyUsage = critical,keyCertSign,cRLSign',
            ]
          : [
              'basicConstraints = critical,CA:FALSE',
              'keyUsage = critical,digitalSignature,keyEncipherment',
              `extendedKeyUsage = ${o.use === undefined ? 'serverAuth,clientAuth' : `${o.use}Auth`}`,
            ]),
        ...(san ? [`subjectAltName = ${san}`] : []),
        'subjectKeyIdentifier = hash',
        'authorityKeyIdentifier = keyid',
        '',
      ].join('\n'),
    );
    // The request's own signature is checked first (-verify): it proves the
    // requester holds the key.
    await openssl(['req', '-in', f('req.csr'), '-verify', '-noout']);
    await openssl([
      'x509', '-req', '-in', f('req.csr'), '-CA', f('ca.crt'), '-CAkey', f('ca.key'),
      '-set_serial', serial(), '-days', String(o.days), '-sha256',
      '-subj', o.cn === null ? `/O=${NO_CN_ORGANIZATION}` : `/CN=${safeCn(o.cn)}`, '-extfile', f('ext.cnf'), '-extensions', 'v3',
      '-out', f('leaf.crt'),
    ]); // prettier-ignore
    return readFile(f('leaf.crt'), 'utf8');
  });
}

/** SHA-256 of a certificate's DER, lowercase hex without colons: how a CA or a host is known. */
export function certSha256(pem: string | Buffer | X509Certificate): string {
  return parsed(pem).fingerprint256.replaceAll(':', '').toLowerCase();
}

/** The CN of a certificate's subject, or undefined. */
export function certCn(pem: string | Buffer | X509Certificate): string | undefined {
  const subject = parsed(pem).subject;
  return /(?:^|\n)CN=([^\n]*)/.exec(subject)?.[1];
}

/** A certificate parsed once by its holder (a TLS socket's peer: getPeerX509Certificate) is not parsed again. */
const parsed = (cert: string | Buffer | X509Certificate) =>
  cert instanceof X509Certificate ? cert : new X509Certificate(cert);

/** The subject of a certificate signed without a CN. */
const NO_CN_ORGANIZATION = 'Basin';

/** A CN openssl takes as is: letters, digits, `-`, `.`, `:`, `_` and spaces; anything else is refused. */
function safeCn(cn: string): string {
  if (/^[A-Za-z0-9][A-Za-z0-9 ._:()-]{0,63}$/.test(cn)) return cn;
  throw new Error(`not a certificate name: ${JSON.stringify(cn)}`);
}

async function inScratch<T>(fn: (dir: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(tmpdir(), 'basin-x509-'));
  try {
    return await fn(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function openssl(args: string[]): Promise<void> {
  try {
    await execFileP('openssl', args, { maxBuffer: 1 << 20 });
  } catch (err) {
    const stderr = (err as { stderr?: string }).stderr ?? '';
    throw new Error(`openssl ${args[0]} failed: ${stderr.trim() || (err as Error).message}`);
  }
}

/** A random positive 127-bit serial: unique without a serial file to share. */
function serial(): string {
  const b = randomBytes(16);
  b[0] = (b[0] as number) & 0x7f;
  return `0x${b.toString('hex')}`;
}
