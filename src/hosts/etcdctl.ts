// Calling etcd as one of its users: `etcdctl` (Debian's etcd-client, the
// same version as the members) with a client certificate, the members CA to
// verify them, and short timeouts. The certificate's files live in a private
// temporary directory for the call only (and a kill -9 during a call
// leaves one behind: the first call of the next process removes those older
// than any call can last).

import { execFile } from 'node:child_process';
import { lstat, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { KeyPair } from '../lib/x509.js';

export interface EtcdClient extends KeyPair {
  /** The members CA: who the endpoints must be. */
  ca: string;
  endpoints: readonly string[];
}

export class EtcdctlError extends Error {}

const PREFIX = 'basin-etcdctl-';
/** Longer than a call can take (its 15 s timeout), so a live call's files are never removed. */
const LEFTOVER_AGE_MS = 60_000;
let swept: Promise<void> | undefined;

/** Removes the certificate directories of calls cut short by a kill (this user's, old enough to be dead). */
async function sweepLeftovers(): Promise<void> {
  const now = Date.now();
  const uid = process.getuid?.();
  for (const name of await readdir(tmpdir()).catch(() => [] as string[])) {
    if (!name.startsWith(PREFIX)) continue;
    const path = join(tmpdir(), name);
    const st = await lstat(path).catch(() => undefined);
    if (!st?.isDirectory() || st.uid !== uid || now - st.mtimeMs < LEFTOVER_AGE_MS) continue;
    await rm(path, { recursive: true, force: true }).catch(() => undefined);
  }
}

/**
 * Runs `etcdctl <args>`; its stdout, or an EtcdctlError with what it said.
 * `asUser` logs in as that etcd user with its password (`ETCDCTL_USER`, in
 * the environment: a command line is world-readable, a process's
 * environment is not), instead of the certificate's CN.
 */
export async function etcdctl(
  client: EtcdClient,
  args: readonly string[],
  input?: string,
  asUser?: { name: string; password: string },
): Promise<string> {
  await (swept ??= sweepLeftovers());
  const dir = await mkdtemp(join(tmpdir(), PREFIX));
  try {
    await writeFile(join(dir, 'ca.crt'), client.ca, { mode: 0o600 });
    await writeFile(join(dir, 'client.crt'), client.cert, { mode: 0o600 });
    await writeFile(join(dir, 'client.key'), client.key, { mode: 0o600 });
    return await new Promise<string>((resolve, reject) => {
      const child = execFile(
        'etcdctl',
        [
          `--endpoints=${client.endpoints.join(',')}`,
          `--cacert=${join(dir, 'ca.crt')}`,
          `--cert=${join(dir, 'client.crt')}`,
          `--key=${join(dir, 'client.key')}`,
          '--dial-timeout=2s',
          '--command-timeout=5s',
          ...args,
        ],
        {
          env: {
            ETCDCTL_API: '3',
            PATH: process.env.PATH ?? '/usr/bin:/bin',
            ...(asUser ? { ETCDCTL_USER: `${asUser.name}:${asUser.password}` } : {}),
          },
          timeout: 15_000,
        },
        (err, stdout, stderr) => {
          if (err) reject(new EtcdctlError((stderr || err.message).trim()));
          else resolve(stdout);
        },
      );
      if (input !== undefined) child.stdin?.end(input);
      else child.stdin?.end();
    });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

export interface EtcdMember {
  /** Hex, as etcdctl takes it back. */
  id: string;
  started: boolean;
  /** The host's id; empty until a member added at runtime has started. */
  name: string;
  peerUrls: string[];
  clientUrls: string[];
}

/** `member list`, parsed from its simple output (its JSON's uint64 ids do not survive JSON.parse). */
export async function memberList(client: EtcdClient): Promise<EtcdMember[]> {
  const out = await etcdctl(client, ['member', 'list']);
  return out
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((line) => {
      const [id, status, name, peers, clients] = line.split(', ');
      return {
        id: id ?? '',
        started: status === 'started',
        name: name ?? '',
        peerUrls: (peers ?? '').split(',').filter(Boolean),
        clientUrls: (clients ?? '').split(',').filter(Boolean),
      };
    });
}

export interface EndpointStatus {
  endpoint: string;
  healthy: boolean;
  leader: boolean;
  error?: string;
}

/** Each endpoint's status, asked separately: one down does not hide the others. */
export async function endpointStatus(
  client: EtcdClient,
  endpoints: readonly string[],
): Promise<EndpointStatus[]> {
  return Promise.all(
    endpoints.map(async (endpoint) => {
      try {
        const out = await etcdctl({ ...client, endpoints: [endpoint] }, [
          'endpoint',
          'status',
          '-w',
          'json',
        ]);
        // Compared as text: the ids are uint64s, which JSON.parse may round alike.
        const raw = /"member_id":(\d+).*?"leader":(\d+)/.exec(out);
        return { endpoint, healthy: raw !== null, leader: raw !== null && raw[1] === raw[2] };
      } catch (err) {
        return { endpoint, healthy: false, leader: false, error: (err as Error).message };
      }
    }),
  );
}
