// The pgBackRest server a backup on the repository host reads a service's
// data directory through (remote.ts): as the service's user, in its
// namespace, on its source port, for the repository host's client alone;
// started for a backup (LocalBackups.openSource) and stopped after it, or
// when it has run for a backup's longest time, or with the agent (it dies
// with the process that started it): no server of the tenant's runs
// between backups.

import { spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { DriverError } from '../../../driver.js';
import { helperCommand } from '../../host/confine.js';
import { childEnv, lastLines, withPrelude, type Prelude } from '../../host/exec.js';
import type { OsUser } from '../../host/os-user.js';
import { accepts } from '../../../../lib/port-probe.js';
import type { SidesContext } from './sides.js';

export interface SourceServer {
  exited(): boolean;
  stop(): void;
}

export async function startSourceServer(
  ctx: SidesContext,
  id: string,
  user: OsUser,
  port: number,
  prelude: Prelude,
  lowPriority: string,
  maxMs: number,
  onStop: () => Promise<void>,
): Promise<SourceServer> {
  const net = ctx.networks.get(id);
  if (!net) throw new DriverError(`Service ${id} has no network of its own.`, true);
  const args = [
    'sh', '-c', lowPriority, 'basin-backup', ctx.pg.pgbackrest,
    `--config=${ctx.layout.backupIdentity(id).serverConf}`, 'server',
  ]; // prettier-ignore
  const cmd = withPrelude(prelude, helperCommand(user, 'setsid', args, ctx.privateTmp));
  const child = spawn(cmd.file, cmd.args, { stdio: ['ignore', 'ignore', 'pipe'], env: childEnv() });
  let output = '';
  child.stderr?.on('data', (d: Buffer) => (output = (output + d.toString()).slice(-4096)));
  let exited = false;
  let stopped = false;
  const stop = () => {
    if (stopped) return;
    stopped = true;
    clearTimeout(timer);
    // Its connections' processes are its children, in its session (setsid).
    for (const pid of child.pid === undefined ? [] : [-child.pid, child.pid]) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone already
      }
    }
    void onStop().catch(() => undefined);
  };
  child.once('exit', () => {
    exited = true;
    stop();
  });
  child.once('error', () => (exited = true));
  const timer = setTimeout(stop, maxMs);
  timer.unref();
  const until = Date.now() + 15_000;
  while (!(await accepts({ host: net.address, port }))) {
    if (exited || Date.now() > until) {
      stop();
      throw new DriverError(
        `The service's pgBackRest server did not start: ${lastLines(output, 3) || 'no output'}`,
        true,
      );
    }
    await sleep(50);
  }
  return { exited: () => exited, stop };
}
