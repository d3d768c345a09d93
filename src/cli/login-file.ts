// Where `basin login` keeps the Basin to talk to: the user's configuration
// directory (XDG: $XDG_CONFIG_HOME/basin, else ~/.config/basin), file
// config.json. It holds an API key, so it is the user's alone: the directory
// 0700 and the file 0600, set with chmod (the process umask does not decide),
// and replaced whole by a rename, so a reader never sees half a file.
//
// BASIN_URL with BASIN_API_KEY stand in for the file (CI, scripts): they win
// over it, and nothing is written.

import {
  chmodSync,
  closeSync,
  fchmodSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  writeSync,
} from 'node:fs';
import { homedir } from 'node:os';
import { isAbsolute, join } from 'node:path';
import { CliFailure } from './cli-failure.js';

export interface Login {
  /** Basin's address, without /v1. */
  url: string;
  apiKey: string;
  /** The project `basin service` commands work in, unless --project says otherwise. */
  projectId?: string | undefined;
  /** The installation's CA certificate, for `basin service psql` (sslmode=verify-full). */
  ca?: string | undefined;
}

export class LoginError extends CliFailure {}

/** $XDG_CONFIG_HOME/basin, else ~/.config/basin (a relative XDG_CONFIG_HOME is ignored, as the spec says). */
export function configDir(env: NodeJS.ProcessEnv): string {
  const xdg = env.XDG_CONFIG_HOME;
  if (xdg && isAbsolute(xdg)) return join(xdg, 'basin');
  return join(env.HOME || homedir(), '.config', 'basin');
}

export const loginFile = (env: NodeJS.ProcessEnv) => join(configDir(env), 'config.json');

/** The login to use: BASIN_URL + BASIN_API_KEY, else the file; undefined when neither. */
export function readLogin(env: NodeJS.ProcessEnv): Login | undefined {
  if (env.BASIN_URL || env.BASIN_API_KEY) {
    if (!env.BASIN_URL || !env.BASIN_API_KEY)
      throw new LoginError('Set both BASIN_URL and BASIN_API_KEY, or neither.');
    return { url: env.BASIN_URL, apiKey: env.BASIN_API_KEY };
  }
  const file = loginFile(env);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new LoginError(`Cannot read ${file}: ${(err as Error).message}`);
  }
  let raw: Record<string, unknown>;
  try {
    raw = JSON.parse(text) as Record<string, unknown>;
  } catch {
    throw new LoginError(`${file} is not JSON; run \`basin login\` again.`);
  }
  const str = (k: string) => (typeof raw[k] === 'string' ? (raw[k] as string) : undefined);
  const url = str('url');
  const apiKey = str('api_key');
  if (!url || !apiKey)
    throw new LoginError(`${file} has no url or api_key; run \`basin login\` again.`);
  return { url, apiKey, projectId: str('project_id'), ca: str('ca') };
}

/** Writes the login (0600 in a 0700 directory); returns the file's path. */
export function writeLogin(env: NodeJS.ProcessEnv, login: Login): string {
  const dir = configDir(env);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
  const file = join(dir, 'config.json');
  const temp = `${file}.${process.pid}.tmp`;
  const body = {
    url: login.url,
    api_key: login.apiKey,
    ...(login.projectId ? { project_id: login.projectId } : {}),
    ...(login.ca ? { ca: login.ca } : {}),
  };
  // 0600 before a byte of the key is written, whatever the umask made of the mode.
  const fd = openSync(temp, 'w', 0o600);
  try {
    fchmodSync(fd, 0o600);
    writeSync(fd, `${JSON.stringify(body, null, 2)}\n`);
  } catch (err) {
    closeSync(fd);
    rmSync(temp, { force: true });
    throw err;
  }
  closeSync(fd);
  renameSync(temp, file);
  return file;
}
