// TLS for every service: a certificate authority made once per installation,
// and a server certificate per node signed by it. A user who trusts the CA
// (ca.crt) can connect with sslmode=verify-full to the public host name,
// the service's own name under it (`<id>.<public host>`, which only this
// service's certificate names: --service-hostnames reports it), localhost
// or the loopback addresses. Keys are ECDSA P-256: small, fast,
// and supported by libpq, JDBC, node-postgres and every TLS 1.2+ client.
//
// The same CA signs the identities of the pgBackRest servers and clients
// of the services' repositories (repository/identities.ts): a server's
// certificate names the address it listens on (its CN: pgBackRest compares
// the CN with the host it connects to, and accepts no IP address in a SAN),
// a client's names what the server authorizes (tls-server-auth); each
// carries the one extended key usage of its side, so that neither passes
// for the other (OpenSSL checks the purpose on both ends).
//
// openssl does the work (Node cannot issue certificates); Node's
// X509Certificate reads them back to decide whether a node's certificate is
// still right, so that nothing about certificates needs remembering.

import { X509Certificate, randomBytes } from 'node:crypto';
import { isIP } from 'node:net';
import { hostname } from 'node:os';
import { access, chmod, chown, lstat, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { run } from '../host/exec.js';
import type { Layout } from '../layout.js';
import { mkdirIn } from './node-files.js';
import { chownTo, isRoot, type OsUser } from '../host/os-user.js';
import { readSmallFile } from '../host/files/safe-fs.js';

const CA_DAYS = 3650;
/** Server certificates last 825 days (the longest that every TLS client accepts)… */
const SERVER_DAYS = 825;
/** …and are reissued, at the next apply, when less than this is left. */
const RENEW_BEFORE_MS = 60 * 24 * 3600 * 1000;

/**
 * Makes the installation's CA unless it exists, or takes the one `given`
 * (a host of several: its CA under the installation's, with the root after
 * it in ca.crt, so that servers send the chain and verify clients against
 * the root). Built aside and renamed into place.
 */
export async function ensureCa(
  layout: Layout,
  given?: () => Promise<{ cert: string; key: string }>,
): Promise<void> {
  if (await exists(layout.caKey)) return;
  const staging = layout.staging(`ca-${randomBytes(4).toString('hex')}`);
  await mkdirIn(staging, 0o700);
  try {
    if (given) {
      const pair = await given();
      await writeFile(join(staging, 'ca.key'), pair.key, { mode: 0o600 });
      await writeFile(join(staging, 'ca.crt'), pair.cert);
      await chmod(join(staging, 'ca.key'), 0o600);
      await chmod(join(staging, 'ca.crt'), 0o644);
      await placeCa(layout, staging);
      return;
    }
    const cnf = join(staging, 'ca.cnf');
    await writeFile(
      cnf,
      [
        '[req]',
        'distinguished_name = dn',
        'prompt = no',
        'x509_extensions = v3_ca',
        '[dn]',
        `CN = Basin local CA (${safeName(hostname())})`,
        '[v3_ca]',
        'basicConstraints = critical,CA:TRUE,pathlen:0',
        'keyUsage = critical,keyCertSign,cRLSign',
        'subjectKeyIdentifier = hash',
        '',
      ].join('\n'),
    );
    await run('openssl', [
      'req', '-x509', '-new', '-config', cnf, '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256',
      '-nodes', '-sha256', '-days', String(CA_DAYS), '-set_serial', serial(),
      '-keyout', join(staging, 'ca.key'), '-out', join(staging, 'ca.crt'),
    ]); // prettier-ignore
    await rm(cnf);
    await chmod(join(staging, 'ca.key'), 0o600);
    await chmod(join(staging, 'ca.crt'), 0o644);
    await placeCa(layout, staging);
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
}

async function placeCa(layout: Layout, staging: string): Promise<void> {
  try {
    await rename(staging, layout.caDir);
  } catch (err) {
    // Someone else made it first: theirs is as good as ours.
    if (!(await exists(layout.caKey))) throw err;
  }
}

/**
 * The names a node's certificate must cover: the public host, the
 * service's (or read replica set's) own name under it when the public host
 * is a DNS name (serviceHostname), localhost and loopback. A certificate
 * issued before a name was added does not cover it, and is issued anew
 * once, at the next apply (serverCertIsCurrent).
 */
export function certHosts(publicHost: string, id?: string): string[] {
  const own = id === undefined ? undefined : serviceHostname(id, publicHost);
  return [
    ...new Set([safeName(publicHost), ...(own ? [own] : []), 'localhost', '127.0.0.1', '::1']),
  ];
}

/** `<id>.<publicHost>`, when the public host is a DNS name (not an address). */
export function serviceHostname(id: string, publicHost: string): string | undefined {
  return isIP(publicHost) === 0 ? safeName(`${id}.${publicHost}`) : undefined;
}

/**
 * Whether `pgdata/server.crt` is signed by the current CA, covers `hosts`
 * and is not near its expiry. Anything else (missing, unreadable) is "no".
 */
export async function serverCertIsCurrent(
  layout: Layout,
  pgdata: string,
  hosts: string[],
  now = Date.now(),
): Promise<boolean> {
  try {
    const ca = new X509Certificate(await readFile(layout.caCert));
    const cert = new X509Certificate(
      await readSmallFile(join(pgdata, 'server.crt'), { maxBytes: 64 * 1024 }),
    );
    // The service's entry, not followed: anything but a file (a link…) is replaced.
    if (!(await lstat(join(pgdata, 'server.key')).catch(() => undefined))?.isFile()) return false;
    if (!cert.checkIssued(ca) || !cert.verify(ca.publicKey)) return false;
    if (Date.parse(cert.validTo) - now < RENEW_BEFORE_MS) return false;
    const sans = new Set(
      (cert.subjectAltName ?? '')
        .split(', ')
        .map((san) => (san.startsWith('IP Address:') ? `IP:${canonicalIp(san.slice(11))}` : san)),
    );
    return hosts.every((h) => sans.has(isIP(h) ? `IP:${canonicalIp(h)}` : `DNS:${h}`));
  } catch {
    return false;
  }
}

/**
 * Issues pgdata/server.{crt,key} for `hosts`, signed by the CA. The key is
 * made in a root-only staging directory and moved in owned by the service's
 * OS user, mode 0600: PostgreSQL refuses a key others can read. The CA's key
 * never leaves root's 0700 ca/ directory.
 */
export async function issueServerCert(
  layout: Layout,
  pgdata: string,
  hosts: string[],
  user: OsUser,
): Promise<void> {
  const san = hosts.map((h) => (isIP(h) ? `IP:${h}` : `DNS:${h}`)).join(',');
  await signed(
    layout,
    'cert',
    [
      `CN = ${hosts[0] ?? 'localhost'}`,
      '[v3]',
      'basicConstraints = critical,CA:FALSE',
      'keyUsage = critical,digitalSignature',
      'extendedKeyUsage = serverAuth',
      `subjectAltName = ${san}`,
    ],
    async ({ key, crt }) => {
      // Under a CA that is not the root clients trust (a host of several:
      // ca.crt is this host's CA, then the root), the server must send its
      // CA with its certificate: clients hold only the root.
      const chain = await issuingChain(layout);
      if (chain) await writeFile(crt, `${(await readFile(crt, 'utf8')).trim()}\n${chain}`);
      for (const file of [key, crt]) {
        await chmod(file, 0o600);
        await chownTo(file, user);
      }
      // PostgreSQL reads the pair at start and at reload (SIGHUP), which the
      // driver sends only once both are in place.
      await rename(crt, join(pgdata, 'server.crt'));
      await rename(key, join(pgdata, 'server.key'));
    },
  );
}

/** The issuing CA's certificate when ca.crt holds a chain (more than the root); otherwise none. */
async function issuingChain(layout: Layout): Promise<string | undefined> {
  const pems = (await readFile(layout.caCert, 'utf8')).match(
    /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g,
  );
  return pems && pems.length > 1 ? `${pems[0]}\n` : undefined;
}

/** A certificate and its key for one side of a pgBackRest TLS connection. */
export interface Identity {
  /** The subject's CN: a server's address, a client's name. */
  cn: string;
  use: 'server' | 'client';
  cert: string;
  key: string;
}

const USAGE = { server: 'serverAuth', client: 'clientAuth' } as const;
const USAGE_OID = { server: '1.3.6.1.5.5.7.3.1', client: '1.3.6.1.5.5.7.3.2' } as const;

/**
 * Whether `id`'s certificate is signed by the current CA, names its CN, is
 * for its use alone and not near its expiry, and its key is a regular file
 * of root's. Anything else (missing, unreadable) is "no".
 */
export async function identityIsCurrent(
  layout: Layout,
  id: Identity,
  now = Date.now(),
): Promise<boolean> {
  try {
    const ca = new X509Certificate(await readFile(layout.caCert));
    const cert = new X509Certificate(await readSmallFile(id.cert, { maxBytes: 64 * 1024 }));
    const key = await lstat(id.key);
    if (!key.isFile() || key.uid !== (process.getuid?.() ?? key.uid)) return false;
    if (!cert.checkIssued(ca) || !cert.verify(ca.publicKey)) return false;
    if (Date.parse(cert.validTo) - now < RENEW_BEFORE_MS) return false;
    const usage = cert.keyUsage ?? [];
    return (
      cert.subject === `CN=${id.cn}` &&
      usage.length === 1 &&
      usage[0] === USAGE_OID[id.use] &&
      cert.subjectAltName === undefined
    );
  } catch {
    return false;
  }
}

/**
 * Issues `id`'s key and certificate, signed by the CA, both root's and
 * readable by `reader`'s group alone (0640): pgBackRest, running as
 * `reader`, reads them; nobody else. Made in a root-only staging directory
 * and renamed into place, the certificate last.
 */
export async function issueIdentity(layout: Layout, id: Identity, reader: OsUser): Promise<void> {
  await signed(
    layout,
    'id',
    [
      `CN = ${identityName(id.cn)}`,
      '[v3]',
      'basicConstraints = critical,CA:FALSE',
      'keyUsage = critical,digitalSignature',
      `extendedKeyUsage = ${USAGE[id.use]}`,
    ],
    async ({ key, crt }) => {
      for (const file of [key, crt]) {
        if (isRoot()) await chown(file, 0, reader.gid);
        await chmod(file, isRoot() ? 0o640 : 0o600);
      }
      await rename(key, id.key);
      await rename(crt, id.cert);
    },
  );
}

/**
 * A key and a certificate signed by the CA, made in a root-only staging
 * directory that `place` moves them out of (and that goes afterwards).
 * `subject` is the `[dn]` section's CN line, then the `[v3]` extensions
 * (subject and authority key identifiers are added). The CA's key never
 * leaves root's 0700 ca/ directory.
 */
async function signed(
  layout: Layout,
  kind: string,
  subject: string[],
  place: (files: { key: string; crt: string }) => Promise<void>,
): Promise<void> {
  const staging = layout.staging(`${kind}-${randomBytes(4).toString('hex')}`);
  await mkdirIn(staging, 0o700);
  try {
    const cnf = join(staging, 'req.cnf');
    const lines = ['[req]', 'distinguished_name = dn', 'prompt = no', '[dn]', ...subject];
    lines.push('subjectKeyIdentifier = hash', 'authorityKeyIdentifier = keyid', '');
    await writeFile(cnf, lines.join('\n'), { mode: 0o600 });
    const key = join(staging, 'req.key');
    const csr = join(staging, 'req.csr');
    const crt = join(staging, 'req.crt');
    await run('openssl', [
      'req', '-new', '-config', cnf, '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256',
      '-nodes', '-keyout', key, '-out', csr,
    ]); // prettier-ignore
    await run('openssl', [
      'x509', '-req', '-in', csr, '-CA', layout.caCert, '-CAkey', layout.caKey,
      '-set_serial', serial(), '-days', String(SERVER_DAYS), '-sha256',
      '-extfile', cnf, '-extensions', 'v3', '-out', crt,
    ]); // prettier-ignore
    await place({ key, crt });
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
}

/** A CN for an identity: an address, or a name of letters, digits and dashes; anything else is refused. */
function identityName(cn: string): string {
  if (isIP(cn) || /^[a-z0-9][a-z0-9-]{0,62}$/.test(cn)) return cn;
  throw new Error(`not an identity name: ${JSON.stringify(cn)}`);
}

/**
 * One spelling per address: OpenSSL shows IPv6 addresses in certificates
 * uncompressed (`0:0:0:0:0:0:0:1`), so `::1` must be compared in the same
 * form, or a certificate would never look current and be issued anew at
 * every apply (while PostgreSQL may be reading the old pair).
 */
function canonicalIp(ip: string): string {
  return isIP(ip) === 6 ? new URL(`http://[${ip}]`).hostname.slice(1, -1) : ip;
}

/** A random positive 127-bit serial: unique without a serial file to share. */
function serial(): string {
  const b = randomBytes(16);
  b[0] = (b[0] as number) & 0x7f;
  return `0x${b.toString('hex')}`;
}

/**
 * A host name or IP address that is safe inside an openssl config line;
 * anything else is refused rather than quoted.
 */
function safeName(name: string): string {
  if (
    isIP(name) ||
    /^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*$/.test(name)
  ) {
    return name;
  }
  throw new Error(`not a host name or IP address: ${JSON.stringify(name)}`);
}

async function exists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch {
    return false;
  }
}
