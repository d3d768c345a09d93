// What a host's etcd member keeps in the agent's data directory, under
// etcd/: member.json (how it was started, and its uid: written last, it is
// what says this host runs a member), etcd.pid (the running process, for a
// restarted agent to adopt), etcd.log, and, owned by the member's own uid
// and private to it, tls/ (its key, certificate and the two CAs) and data/.

import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import type { EtcdMemberPlan } from '../../domain/etcd.js';

export interface MemberState {
  plan: EtcdMemberPlan;
  uid: number;
}

export interface MemberTls {
  key: string;
  certificate: string;
  membersCa: string;
  clientsCa: string;
}

export function etcdDir(dataDir: string): string {
  return join(dataDir, 'etcd');
}

export function memberPaths(dataDir: string) {
  const dir = etcdDir(dataDir);
  return {
    dir,
    state: join(dir, 'member.json'),
    pid: join(dir, 'etcd.pid'),
    log: join(dir, 'etcd.log'),
    data: join(dir, 'data'),
    tls: join(dir, 'tls'),
  };
}

export function readMemberState(dataDir: string): MemberState | undefined {
  const { state } = memberPaths(dataDir);
  return existsSync(state) ? (JSON.parse(readFileSync(state, 'utf8')) as MemberState) : undefined;
}

/**
 * Lays a new member out: its directories and TLS files for `uid`, an empty
 * data directory, and member.json last. What a kill left half-made before
 * member.json is swept first.
 */
export function installMember(dataDir: string, s: MemberState, tls: MemberTls): void {
  const p = memberPaths(dataDir);
  rmSync(p.dir, { recursive: true, force: true });
  // The member's uid must cross the agent's data directory and etcd/ (never list them).
  const top = statSync(dataDir).mode & 0o777;
  if ((top & 0o001) === 0) chmodSync(dataDir, top | 0o001);
  mkdirSync(p.dir, { mode: 0o711 });
  chmodSync(p.dir, 0o711);
  for (const d of [p.tls, p.data]) {
    mkdirSync(d, { mode: 0o700 });
    chmodSync(d, 0o700);
  }
  const files: [string, string][] = [
    ['member.key', tls.key],
    ['member.crt', tls.certificate],
    ['members-ca.crt', tls.membersCa],
    ['clients-ca.crt', tls.clientsCa],
  ];
  for (const [name, text] of files) {
    writeFileSync(join(p.tls, name), text, { mode: 0o600 });
    chownSync(join(p.tls, name), s.uid, s.uid);
  }
  chownSync(p.tls, s.uid, s.uid);
  chownSync(p.data, s.uid, s.uid);
  writeAtomically(p.state, `${JSON.stringify(s)}\n`);
}

/**
 * What the member's client port trusts: the clients CA (every identity that
 * calls etcd) and the members CA. The second because etcd 3.4's JSON
 * gateway, Patroni's way in, is a gRPC client of its own member's port that
 * presents the member's certificate; trusted, that certificate names the
 * user `basin-etcd-member`, which does not exist, so it reads and writes
 * nothing itself (a gateway request carries its caller's password token).
 * The peer port still trusts the members CA alone. Written at each start
 * from the two CAs, so a member laid out before it gets it too.
 */
export function writeClientTrust(dataDir: string, uid: number): string {
  const { tls } = memberPaths(dataDir);
  const file = join(tls, 'client-trust.crt');
  const pem = (name: string) => readFileSync(join(tls, name), 'utf8').trim();
  writeAtomically(file, `${pem('clients-ca.crt')}\n${pem('members-ca.crt')}\n`);
  chownSync(file, uid, uid);
  return file;
}

/** Forgets the member: what it ran with and its data (it was removed from the cluster). */
export function removeMember(dataDir: string): void {
  const p = memberPaths(dataDir);
  // member.json first: a kill midway leaves no member, only files the next install sweeps.
  rmSync(p.state, { force: true });
  rmSync(p.dir, { recursive: true, force: true });
}

export function writePid(dataDir: string, pid: number): void {
  writeAtomically(memberPaths(dataDir).pid, `${pid}\n`);
}

export function readPid(dataDir: string): number | undefined {
  const { pid } = memberPaths(dataDir);
  if (!existsSync(pid)) return undefined;
  const n = Number(readFileSync(pid, 'utf8').trim());
  return Number.isInteger(n) && n > 0 ? n : undefined;
}

function writeAtomically(file: string, text: string): void {
  const tmp = `${file}.tmp`;
  writeFileSync(tmp, text, { mode: 0o600 });
  renameSync(tmp, file);
}
