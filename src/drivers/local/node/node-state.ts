// What the driver last did to a node, in a small JSON file beside its data
// directory (Layout.stateFile). It makes applyService idempotent and cheap:
// a password is set, an extension created, a restart or a reload done only
// when what is wanted differs from what was applied. The file survives
// Basin's restarts, so an adopted server is not restarted for nothing.
//
// Only hashes are kept: the password verifier is a secret.

import { createHash } from 'node:crypto';
import { chmod, readFile, rename, writeFile } from 'node:fs/promises';

/**
 * How a node restored from another service's data recovers, decided when
 * its data was made (fork-restore.ts) and applied until it is open.
 */
export type Recovery =
  /** Replay the WAL that came with the copy, stop where the copy is consistent. */
  | { kind: 'copy' }
  /** Started as it is: a copy of a cleanly stopped cluster needs no recovery. */
  | { kind: 'none' }
  /**
   * Replay WAL from the restored parent's stanza (fork-source.conf): to
   * consistency, to a time, or to its end. `systemIds`: each segment
   * fetched goes from the parent's identifier to the fork's (fork-check.ts;
   * forks restored before identifiers were given have none).
   */
  | {
      kind: 'repo';
      stanza: string;
      target: 'immediate' | 'end' | { time: string };
      systemIds?: { parent: string; fork: string };
    };

export interface NodeState {
  /** Hash of the restart-only settings the running postmaster was started with. */
  startedWith?: string;
  /** Hash of every configuration file as last loaded (at start or by a reload). */
  loaded?: string;
  /** Hash of the tsdbadmin password verifier last set. */
  password?: string;
  /** Extensions created in tsdb. */
  extensions: string[];
  /** The version of tsdbadmin's grants last applied (admin.ts, ADMIN_GRANTS). */
  adminGrants?: number;
  /**
   * A fork's node: 'recovering' from the moment its data is in place until
   * it was promoted, its password reset and its parent's WAL source removed
   * (its access rules admit nobody but Basin until then); then 'open'.
   */
  fork?: 'recovering' | 'open';
  /** How a recovering fork recovers. */
  recovery?: Recovery;
  /**
   * When Basin last stopped this server cleanly with everything committed
   * before archived (epoch ms, taken before its last commit): a stopped
   * service's forks to later moments are copies of its data directory.
   * Cleared when the server starts.
   */
  walMarkedAt?: number;
  /** A stop in progress: the WAL segment that must be archived before the server stops, and since when. */
  walMark?: { at: number; segment: string };
  /**
   * A standby: the primary's timeline it was last found able to follow
   * (follow.ts); it is looked at again when the primary's timeline changes.
   */
  follows?: number;
  /**
   * A standby that must be rewound onto its primary's timeline before it
   * runs again: 'wanted' once decided (it is stopped first; 'rebuild' when
   * a rewind onto that timeline did not help), 'running' while
   * pg_rewind changes its files. Found 'running' by a later call, pg_rewind
   * was interrupted (Basin died): the files are half rewound, and running
   * pg_rewind again on them could miss blocks, so the node is rebuilt.
   */
  rewind?: 'wanted' | 'running' | 'rebuild';
  /**
   * A read replica set's node across hosts: the primary it streams from
   * (`<host>:<port>`), as last converged; another one (its service moved
   * to another host) rebuilds it (service-node.ts notePrimaryMoved).
   */
  streamsFrom?: string;
  /** The primary's timeline this node was last rewound onto: one still behind it afterwards is rebuilt. */
  rewoundFor?: number;
  /**
   * Basin started this primary in recovery (standby.signal) because its
   * service is past its storage ceiling (storage/node-storage.ts): the
   * signal file is Basin's to take away, and the node is not a standby to
   * promote.
   */
  storageRecovery?: boolean;
  /**
   * Since when (epoch ms) the server runs, as Basin first saw it accept
   * connections; cleared when Basin stops it. Found not running while set,
   * it died on its own (restarts.ts).
   */
  upSince?: number;
  /**
   * Its deaths in a row (none after it ran for the policy's stable time):
   * how many, and when the restart after the last one is due (epoch ms).
   */
  restarts?: { count: number; dueAt: number };
}

export const hash = (...parts: string[]): string => {
  const h = createHash('sha256');
  for (const p of parts) h.update(p).update('\0');
  return h.digest('hex');
};

export async function readNodeState(file: string): Promise<NodeState> {
  try {
    const raw = JSON.parse(await readFile(file, 'utf8')) as Partial<NodeState>;
    return {
      startedWith: typeof raw.startedWith === 'string' ? raw.startedWith : undefined,
      loaded: typeof raw.loaded === 'string' ? raw.loaded : undefined,
      password: typeof raw.password === 'string' ? raw.password : undefined,
      extensions: Array.isArray(raw.extensions)
        ? raw.extensions.filter((e): e is string => typeof e === 'string')
        : [],
      ...(typeof raw.adminGrants === 'number' ? { adminGrants: raw.adminGrants } : {}),
      // Root's own file (0600 in a root directory): trusted as written.
      ...(raw.fork === 'recovering' || raw.fork === 'open' ? { fork: raw.fork } : {}),
      ...(raw.recovery ? { recovery: raw.recovery } : {}),
      ...(typeof raw.walMarkedAt === 'number' ? { walMarkedAt: raw.walMarkedAt } : {}),
      ...(raw.walMark ? { walMark: raw.walMark } : {}),
      ...(typeof raw.follows === 'number' ? { follows: raw.follows } : {}),
      ...(raw.rewind === 'wanted' || raw.rewind === 'running' || raw.rewind === 'rebuild'
        ? { rewind: raw.rewind }
        : {}),
      ...(typeof raw.rewoundFor === 'number' ? { rewoundFor: raw.rewoundFor } : {}),
      ...(typeof raw.streamsFrom === 'string' ? { streamsFrom: raw.streamsFrom } : {}),
      ...(raw.storageRecovery === true ? { storageRecovery: true } : {}),
      ...(typeof raw.upSince === 'number' ? { upSince: raw.upSince } : {}),
      ...(typeof raw.restarts?.count === 'number' && typeof raw.restarts.dueAt === 'number'
        ? { restarts: { count: raw.restarts.count, dueAt: raw.restarts.dueAt } }
        : {}),
    };
  } catch {
    // Missing or torn: everything is re-applied, which is always safe.
    return { extensions: [] };
  }
}

/** Written to a temporary name and renamed, so a crash leaves the old or the new file. */
export async function writeNodeState(file: string, state: NodeState): Promise<void> {
  const tmp = `${file}.tmp`;
  await writeFile(tmp, `${JSON.stringify(state, null, 2)}\n`, { mode: 0o600 });
  // writeFile's mode only applies to a new file (a crash may have left one).
  await chmod(tmp, 0o600);
  await rename(tmp, file);
}
