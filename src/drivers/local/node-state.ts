// What the driver last did to a node, in a small JSON file beside its data
// directory (Layout.stateFile). It makes applyService idempotent and cheap:
// a password is set, an extension created, a restart or a reload done only
// when what is wanted differs from what was applied. The file survives
// Basin's restarts, so an adopted server is not restarted for nothing.
//
// Only hashes are kept: the password verifier is a secret.

import { createHash } from 'node:crypto';
import { chmod, readFile, rename, writeFile } from 'node:fs/promises';

export interface NodeState {
  /** Hash of the restart-only settings the running postmaster was started with. */
  startedWith?: string;
  /** Hash of every configuration file as last loaded (at start or by a reload). */
  loaded?: string;
  /** Hash of the tsdbadmin password verifier last set. */
  password?: string;
  /** Extensions created in tsdb. */
  extensions: string[];
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
