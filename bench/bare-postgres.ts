// PostgreSQL started by hand on a data directory a benchmark restored with
// pgBackRest (its baseline): as the directory's owner, no TCP listener, no
// archiving, its output in <sockets>/postgres.log, until postmaster.pid
// says it is ready; stopped (SIGQUIT) afterwards.

import { spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { postmasterPid } from './local-basin.js';

export interface BarePostgres {
  /** Until it accepts connections; throws with its last lines if it stops or `timeoutMs` passes. */
  ready(timeoutMs: number): Promise<void>;
  stop(): Promise<void>;
}

export function startBarePostgres(o: {
  pgdata: string;
  sockets: string;
  uid: number;
  gid: number;
  /** More `-c` settings (`name=value`). */
  settings?: string[];
}): BarePostgres {
  const logFile = join(o.sockets, 'postgres.log');
  const log = openSync(logFile, 'a', 0o600);
  let child;
  try {
    const settings = ['listen_addresses=', `unix_socket_directories=${o.sockets}`,
      'archive_mode=off', 'hot_standby=off', ...(o.settings ?? [])]; // prettier-ignore
    child = spawn(
      '/usr/lib/postgresql/15/bin/postgres',
      ['-D', o.pgdata, ...settings.flatMap((s) => ['-c', s])],
      {
        uid: o.uid,
        gid: o.gid,
        env: { PATH: '/usr/bin:/bin', LANG: 'C.UTF-8', LC_ALL: 'C.UTF-8' },
        cwd: o.pgdata,
        detached: true,
        stdio: ['ignore', log, log],
      },
    );
  } finally {
    closeSync(log);
  }
  const pid = child.pid;
  const exited = new Promise<'exited'>((resolve) => child.once('exit', () => resolve('exited')));
  return {
    async ready(timeoutMs) {
      const deadline = Date.now() + timeoutMs;
      while (postmasterPid(o.pgdata)?.status !== 'ready') {
        if (Date.now() > deadline)
          throw new Error(`PostgreSQL never became ready: ${tail(logFile)}`);
        if ((await Promise.race([exited, sleep(20).then(() => 'running')])) === 'exited') {
          throw new Error(`PostgreSQL stopped: ${tail(logFile)}`);
        }
      }
    },
    async stop() {
      if (pid === undefined) return;
      try {
        process.kill(pid, 'SIGQUIT');
      } catch {
        // gone
      }
      await Promise.race([exited, sleep(10_000)]);
    },
  };
}

function tail(path: string): string {
  try {
    return readFileSync(path, 'utf8').trim().split('\n').slice(-12).join(' | ');
  } catch {
    return '(no output)';
  }
}
