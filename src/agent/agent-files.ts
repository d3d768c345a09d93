// What `basin host run` keeps in its data directory: who it is in the
// installation (host.json) and its TLS files (tls/). Written aside and
// renamed into place, private to root: a kill at any moment leaves the old
// file or the new, and a host that joined stays joined across restarts.

import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { HostRole } from '../domain/hosts.js';

export interface AgentIdentity {
  hostId: string;
  name: string;
  /** What it joined as: a host cannot change its role without joining again. */
  role: HostRole;
  /** The control plane's host listener, https://address:port. */
  controlPlane: string;
  cert: string;
  key: string;
  ca: string;
}

export function readIdentity(dataDir: string): AgentIdentity | undefined {
  const file = join(dataDir, 'host.json');
  if (!existsSync(file)) return undefined;
  const who = JSON.parse(readFileSync(file, 'utf8')) as Pick<
    AgentIdentity,
    'hostId' | 'name' | 'controlPlane' | 'role'
  >;
  const tls = (name: string) => readFileSync(join(dataDir, 'tls', name), 'utf8');
  // Hosts joined before roles were database hosts.
  const role = who.role === 'repository' ? 'repository' : 'database';
  return { ...who, role, cert: tls('host.crt'), key: tls('host.key'), ca: tls('ca.crt') };
}

/** The TLS files first, host.json last: it is what says the host has joined. */
export function writeIdentity(dataDir: string, id: AgentIdentity): void {
  const tls = join(dataDir, 'tls');
  mkdirSync(tls, { recursive: true, mode: 0o700 });
  chmodSync(tls, 0o700);
  writeAtomically(join(tls, 'host.key'), id.key);
  writeAtomically(join(tls, 'host.crt'), id.cert);
  writeAtomically(join(tls, 'ca.crt'), id.ca);
  const { hostId, name, controlPlane, role } = id;
  writeAtomically(
    join(dataDir, 'host.json'),
    `${JSON.stringify({ hostId, name, controlPlane, role })}\n`,
  );
}

export function writeAtomically(file: string, text: string): void {
  const tmp = `${file}.tmp`;
  writeFileSync(tmp, text, { mode: 0o600 });
  renameSync(tmp, file);
}
