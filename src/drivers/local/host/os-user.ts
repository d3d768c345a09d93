// The unprivileged OS users PostgreSQL runs as. PostgreSQL refuses to run as
// root (a server bug must not hand out the machine). When Basin runs as
// root, every service's clusters run as that service's own OS user
// (service-users.ts, docs/security.md), and the template cluster they are
// copied from belongs to the template user: `postgres` (the Debian
// package's user) or the configured one. When Basin is not root, it can
// only run them all as itself.

import { execFileSync } from 'node:child_process';
import { chown, stat, chmod } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { dirname, sep } from 'node:path';
import { HostCheckError } from '../errors.js';

export interface OsUser {
  name: string;
  uid: number;
  gid: number;
  /**
   * A service's (or read replica set's) own user: the RLIMIT_NPROC of
   * every process Basin starts as it (node-bounds.ts, serviceNproc).
   */
  nproc?: number;
  /**
   * A tenant's user (a service's or a read replica set's) when services
   * have networks of their own: the namespace every process of it runs in
   * (its file, /run/netns/…), which confine.ts joins first.
   */
  netns?: string;
}

/** One line of /etc/passwd. */
export interface PasswdEntry extends OsUser {
  /** The comment (GECOS) field. */
  comment: string;
}

export const isRoot = (): boolean => process.getuid?.() === 0;

/** The template user (every cluster's, when Basin is not root); throws HostCheckError when it cannot be used. */
export function resolveOsUser(requested: string | undefined): OsUser {
  if (!isRoot()) {
    const me = userInfo();
    if (requested !== undefined && requested !== me.username) {
      throw new HostCheckError(
        `Basin runs as ${me.username}, not root, so it can only run PostgreSQL as ${me.username}, not ${requested}: ` +
          'drop the OS user setting or run Basin as root.',
      );
    }
    return { name: me.username, uid: me.uid, gid: me.gid };
  }
  const name = requested ?? 'postgres';
  const user = lookupPasswd(name) ?? lookupWithId(name);
  if (!user) {
    throw new HostCheckError(
      `The OS user "${name}" that runs PostgreSQL does not exist. The postgresql package creates ` +
        '"postgres": run: sudo scripts/setup-host.sh (or create the user you configured).',
    );
  }
  if (user.uid === 0) {
    throw new HostCheckError(
      `The OS user "${name}" is root; PostgreSQL refuses to run as root: configure an unprivileged user.`,
    );
  }
  return user;
}

function lookupPasswd(name: string): OsUser | undefined {
  const e = readPasswd().find((p) => p.name === name);
  return e && { name: e.name, uid: e.uid, gid: e.gid };
}

/**
 * The local users (/etc/passwd, where useradd puts them); empty when it
 * cannot be read. Read afresh at every call: it is small, and users come
 * and go with services.
 */
export function readPasswd(file = '/etc/passwd'): PasswdEntry[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return [];
  }
  const out: PasswdEntry[] = [];
  for (const line of text.split('\n')) {
    const [name, , uid, gid, comment] = line.split(':');
    if (!name || uid === undefined || gid === undefined) continue;
    const u = Number(uid);
    const g = Number(gid);
    if (uid !== '' && gid !== '' && Number.isInteger(u) && Number.isInteger(g)) {
      out.push({ name, uid: u, gid: g, comment: comment ?? '' });
    }
  }
  return out;
}

/** Whether a group of that name exists (/etc/group). */
export function groupExists(name: string): boolean {
  try {
    return readFileSync('/etc/group', 'utf8')
      .split('\n')
      .some((line) => line.split(':')[0] === name);
  } catch {
    return false;
  }
}

/** Users from LDAP & co. are not in /etc/passwd; `id` asks NSS. */
function lookupWithId(name: string): OsUser | undefined {
  try {
    const uid = Number(execFileSync('id', ['-u', name], { encoding: 'utf8' }).trim());
    const gid = Number(execFileSync('id', ['-g', name], { encoding: 'utf8' }).trim());
    return Number.isInteger(uid) && Number.isInteger(gid) ? { name, uid, gid } : undefined;
  } catch {
    return undefined;
  }
}

/** Gives a path to `user` (a no-op when Basin is not root: it already owns what it creates). */
export async function chownTo(path: string, user: OsUser): Promise<void> {
  if (isRoot()) await chown(path, user.uid, user.gid);
}

/** Stands for "any other user" in ensureTraversable: the services' users own none of the path. */
export const OTHERS: OsUser = { name: "the services' OS users", uid: -1, gid: -1 };

/**
 * PostgreSQL, running as `user`, must be able to reach its data directory:
 * every directory above it needs the search (x) permission for that user.
 * Basin creates its data directory 0700, so the directories Basin owns from
 * `ownedFrom` down get the search bit for others (not read: nobody can list
 * them, and files in them keep their own modes: basin.db is 0600); a
 * directory above it that `user` cannot cross is the operator's to fix, and
 * the error says how. With OTHERS, every directory must let anyone search it.
 */
export async function ensureTraversable(dir: string, ownedFrom: string, user: OsUser) {
  const blocked: string[] = [];
  for (let d = dir; ; d = dirname(d)) {
    const st = await stat(d);
    const bit = st.uid === user.uid ? 0o100 : st.gid === user.gid ? 0o010 : 0o001;
    if ((st.mode & bit) === 0) {
      if (d === ownedFrom || d.startsWith(ownedFrom + sep))
        await chmod(d, (st.mode & 0o7777) | 0o001);
      else blocked.push(d);
    }
    if (dirname(d) === d) break;
  }
  if (blocked.length > 0) {
    const who = user === OTHERS ? user.name : `the OS user "${user.name}"`;
    throw new HostCheckError(
      `PostgreSQL runs as ${who}, which cannot reach the data directory ${ownedFrom} ` +
        `through ${blocked.join(', ')}. Give it the search permission (chmod o+x ${blocked.join(' ')}) ` +
        'or choose a data directory it can reach.',
    );
  }
}
