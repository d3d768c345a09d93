// Running the few external programs the local driver needs (initdb, openssl,
// cp, chown, rm, useradd, userdel). Always execFile, never a shell: arguments are passed as they are, so
// no path or host name can be interpreted as shell syntax.

import { execFile } from 'node:child_process';
import type { OsUser } from './os-user.js';
import { spawnIdentity } from './os-user.js';

export interface RunOptions {
  /** Run as this OS user (needs root) instead of Basin's own. */
  as?: OsUser;
  cwd?: string;
  timeoutMs?: number;
}

export class CommandError extends Error {
  constructor(
    readonly command: string,
    readonly output: string,
    cause: string,
    /** The exit status, when the command ran and exited with one. */
    readonly exitCode?: number,
  ) {
    super(`${command} failed (${cause})${output ? `: ${lastLines(output, 8)}` : ''}`);
    this.name = 'CommandError';
  }
}

/**
 * The environment of every child. Basin's own environment is never passed
 * on: it may hold credentials (BASIN_BOOTSTRAP_API_KEY…), and PostgreSQL
 * honours PG* variables that must not leak in from the operator's shell.
 */
export function childEnv(): NodeJS.ProcessEnv {
  return {
    PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
    LANG: 'C.UTF-8',
    LC_ALL: 'C.UTF-8',
  };
}

/** Runs `file args…` and resolves with its stdout; rejects with a CommandError carrying its output. */
export function run(file: string, args: string[], options: RunOptions = {}): Promise<string> {
  const command = [file, ...args].join(' ');
  return new Promise((resolve, reject) => {
    execFile(
      file,
      args,
      {
        cwd: options.cwd,
        env: childEnv(),
        timeout: options.timeoutMs ?? 60_000,
        maxBuffer: 4 * 1024 * 1024,
        ...(options.as ? spawnIdentity(options.as) : {}),
      },
      (err, stdout, stderr) => {
        if (err) {
          const code = (err as NodeJS.ErrnoException).code;
          const cause =
            code === 'ENOENT'
              ? 'not found'
              : err.killed
                ? 'timed out'
                : `exit ${String((err as { code?: unknown }).code ?? err.message)}`;
          const status = (err as { code?: unknown }).code;
          const exitCode = typeof status === 'number' ? status : undefined;
          reject(new CommandError(command, `${stderr}${stdout}`.trim(), cause, exitCode));
        } else {
          resolve(stdout);
        }
      },
    );
  });
}

/** The last `n` non-empty lines of a text, joined with ' | ' to fit an error message. */
export function lastLines(text: string, n: number): string {
  return text
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)
    .slice(-n)
    .join(' | ');
}
