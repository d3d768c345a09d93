// Basin's data directory is Basin's (docs/security.md). It holds the store
// (credential hashes, password verifiers), the CA key and, under local/,
// every service's database; the services' own OS users run on the same
// host, and a tenant's tsdbadmin can run programs as one of them. So at
// every start, not only when it is made, the directory and what Basin keeps
// in it get their documented modes: a data directory made by an older Basin,
// or a `server.log` an operator redirected into it, must not stay readable.
//
// Modes are always set with chmod: mkdir's and open's modes are filtered by
// the umask, and only apply to what they create.

import { chmodSync, lstatSync, mkdirSync, readdirSync, realpathSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { Logger } from './logger.js';

/**
 * Makes `dir` unless it exists: each missing parent 0711 (others may cross
 * it, as the services' PostgreSQL must to reach their files, but not list
 * it), `dir` itself 0700.
 */
export function makeDataDir(dir: string): void {
  const missing: string[] = [];
  for (let d = resolve(dir); !exists(d); d = dirname(d)) missing.unshift(d);
  for (const d of missing) {
    try {
      mkdirSync(d, { mode: 0o700 });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      continue; // made meanwhile by someone else: their mode stands
    }
    chmodSync(d, d === missing.at(-1) ? 0o700 : 0o711);
  }
}

export interface SecureDataDirOptions {
  /**
   * Entries of the data directory that keep their own modes, set by their
   * owner (the local driver's `local/` tree, which services must cross).
   */
  ownModes: readonly string[];
  log: Logger;
}

/**
 * Makes the data directory if needed and takes every access of others
 * away: the directory becomes 0700 (0701 stays 0701: the local driver
 * needs others to cross it, never to list it), and every entry in it but
 * `ownModes` loses all group and other permissions (basin.db and its -wal
 * and -shm, tls/, and whatever else is there). Symbolic links are left
 * alone (chmod would follow them). Warns once when a directory above it
 * lets every user rename or replace what it holds.
 */
export function secureDataDir(dir: string, options: SecureDataDirOptions): void {
  makeDataDir(dir);
  const real = realpathSync(dir);
  const st = lstatSync(real);
  setMode(real, st.mode, 0o700 | (st.mode & 0o001));
  for (const name of readdirSync(real)) {
    if (options.ownModes.includes(name)) continue;
    const path = `${real}/${name}`;
    const entry = lstatSync(path, { throwIfNoEntry: false });
    if (!entry || entry.isSymbolicLink()) continue;
    setMode(path, entry.mode, entry.mode & 0o700);
  }
  const open = worldWritableAbove(real);
  if (open.length > 0) {
    options.log.warn(
      { dataDir: real, directories: open },
      `WARNING: the data directory ${real} lies under ${open.join(', ')}, which every user ` +
        "may write to and which has no sticky bit: any local user, a service's included, " +
        'can rename it and put a directory of theirs in its place. Move the data directory, or set the sticky bit (chmod +t).',
    );
  }
}

/** The directories above `dir` that every user may write to without the sticky bit. */
export function worldWritableAbove(dir: string): string[] {
  const out: string[] = [];
  for (let d = dirname(dir); ; d = dirname(d)) {
    const st = lstatSync(d);
    if ((st.mode & 0o002) !== 0 && (st.mode & 0o1000) === 0) out.push(d);
    if (dirname(d) === d) break;
  }
  return out;
}

function setMode(path: string, current: number, wanted: number): void {
  if ((current & 0o7777) !== wanted) chmodSync(path, wanted);
}

function exists(path: string): boolean {
  return lstatSync(path, { throwIfNoEntry: false }) !== undefined;
}
