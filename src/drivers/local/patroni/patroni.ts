// Starting, adopting and stopping one node's Patroni
// (https://patroni.readthedocs.io/en/latest/): a daemon of the service's OS
// user, started as a postmaster is (confine.ts: its network namespace,
// no_new_privs, private /tmp & co.), detached so that it outlives Basin,
// which finds it again from a record of its own. Patroni starts, stops,
// promotes and demotes the node's PostgreSQL itself; Basin starts and stops
// Patroni, and only reads what it says (client.ts).
//
// The record (patroni.json, root's) holds the pid and the process's start
// time (/proc/<pid>/stat, field 22), checked with its owner and command
// line, so that a recycled pid is never taken for the node's Patroni. A
// record that names no live Patroni is not the last word: a Patroni of the
// node's user with the node's configuration found running is adopted (and
// recorded), never started twice. Two Patronis of one node fight over its
// REST API's port: the second exits, but only after the start had killed
// the first one's PostgreSQL as "left by a killed Patroni", and every later
// apply did the same again (a drain's moved node restarted every few
// seconds, for ever).

import { constants } from 'node:fs';
import { access, readFile, rm, writeFile, rename } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { DriverError } from '../../driver.js';
import { tenantCommand, type PrivateTmp } from '../host/confine.js';
import { type Prelude, withPrelude } from '../host/exec.js';
import type { OsUser } from '../host/os-user.js';
import {
  clusterProcesses,
  isLive,
  procCmdline,
  processesOfUser,
  signalAll,
} from '../host/processes.js';
import { spawnTenantDaemon, type Spawned } from '../node/postmaster.js';
import type { PatroniFiles } from './files.js';

/**
 * Patroni's program: Debian's patroni 3.0.2 with Basin's patch (the leader
 * key renewed by a transaction, so a healed partition's old primary cannot
 * take it back: scripts/patroni/leader-key-txn.patch), a copy that
 * scripts/setup-host.sh makes beside the package. Its name ends in
 * "patroni", which patroniStatus looks for in the command line.
 */
export const PATRONI_BIN = '/usr/local/lib/basin-patroni/bin/patroni';

interface PatroniRecord {
  pid: number;
  startTime: string;
}

export type PatroniStatus = { up: false } | { up: true; pid: number };

/** The start time of `pid` in clock ticks since boot (/proc/<pid>/stat, field 22), or undefined. */
async function startTime(pid: number): Promise<string | undefined> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
}

/** The uid `pid` runs as (its real uid), or undefined. */
async function procUid(pid: number): Promise<number | undefined> {
  try {
    const m = /^Uid:\s+(\d+)/m.exec(await readFile(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

/** Whether `pid` is Patroni run with this node's configuration (a wrapper's command line ends the same). */
async function isNodePatroni(pid: number, f: PatroniFiles): Promise<boolean> {
  const argv = await procCmdline(pid);
  return argv.some((a) => /(^|\/)patroni$/.test(a)) && argv.at(-1) === f.config;
}

/** The recorded process, when it is live, started when recorded, runs as `user` and is this node's Patroni. */
async function recordedPatroni(f: PatroniFiles, user: OsUser): Promise<number | undefined> {
  let rec: PatroniRecord;
  try {
    rec = JSON.parse(await readFile(f.state, 'utf8')) as PatroniRecord;
  } catch {
    return undefined;
  }
  const pid = rec.pid;
  if (!Number.isInteger(pid) || pid <= 0 || !(await isLive(pid))) return undefined;
  if ((await startTime(pid)) !== rec.startTime || (await procUid(pid)) !== user.uid) {
    return undefined;
  }
  return (await isNodePatroni(pid, f)) ? pid : undefined;
}

/** The oldest live process of `user` running Patroni with this node's configuration, unrecorded. */
async function foundPatroni(f: PatroniFiles, user: OsUser): Promise<number | undefined> {
  let oldest: { pid: number; time: number } | undefined;
  for (const pid of await processesOfUser(user.uid)) {
    if ((await procUid(pid)) !== user.uid || !(await isNodePatroni(pid, f))) continue;
    const time = Number(await startTime(pid));
    if (Number.isFinite(time) && (!oldest || time < oldest.time)) oldest = { pid, time };
  }
  return oldest?.pid;
}

/** Records `pid` as the node's Patroni. */
async function record(f: PatroniFiles, pid: number, time: string): Promise<void> {
  const tmp = `${f.state}.tmp`;
  await writeFile(tmp, JSON.stringify({ pid, startTime: time }) + '\n', { mode: 0o600 });
  await rename(tmp, f.state);
}

/**
 * Whether the node's Patroni runs: the recorded process (live, started
 * when recorded, as `user`, Patroni with this node's configuration), else
 * one such process found running unrecorded.
 */
export async function patroniStatus(f: PatroniFiles, user: OsUser): Promise<PatroniStatus> {
  const pid = (await recordedPatroni(f, user)) ?? (await foundPatroni(f, user));
  return pid === undefined ? { up: false } : { up: true, pid };
}

/**
 * Starts the node's Patroni unless it runs (adopting one a previous Basin
 * started): as `user`, confined, its output appended to the node's log.
 * The caller wrote its configuration (patroni-config.ts) and made its
 * directories (files.ts). Returns the running pid.
 */
export async function startPatroni(o: {
  files: PatroniFiles;
  user: OsUser;
  privateTmp?: PrivateTmp | undefined;
  /** The node's cgroups and oom_score_adj, as a postmaster's (exec.ts). */
  prelude?: Prelude;
}): Promise<{ pid: number; adopted: boolean; spawned?: Spawned }> {
  const { files: f, user } = o;
  const recorded = await recordedPatroni(f, user);
  if (recorded !== undefined) return { pid: recorded, adopted: true };
  const found = await foundPatroni(f, user);
  const foundTime = found === undefined ? undefined : await startTime(found);
  if (found !== undefined && foundTime !== undefined) {
    await record(f, found, foundTime);
    return { pid: found, adopted: true };
  }
  // A PostgreSQL left by a Patroni killed with SIGKILL still runs: the new
  // Patroni would find its lock file and refuse, or adopt a server it did
  // not configure. It is stopped first (immediate: the new Patroni's
  // start replays its WAL).
  await killCluster(f.pgdata);
  // Debian's unpatched /usr/bin/patroni is never a fallback: it can split the brain.
  try {
    await access(PATRONI_BIN, constants.X_OK);
  } catch {
    throw new DriverError(
      `HA replicas need Basin's patched Patroni (${PATRONI_BIN}), which this host lacks: ` +
        'run npm run setup (as root; scripts/setup-host.sh makes it).',
      false,
    );
  }
  const cmd = tenantCommand(user, PATRONI_BIN, [f.config], { privateTmp: o.privateTmp });
  const spawned = spawnTenantDaemon(o.prelude ? withPrelude(o.prelude, cmd) : cmd, f.data, f.log, {
    // Python writes nothing beside its modules, and buffers no log line.
    PYTHONDONTWRITEBYTECODE: '1',
    PYTHONUNBUFFERED: '1',
  });
  if (spawned.exit) throw new Error(`Patroni could not be started (${f.log})`);
  const time = await startTime(spawned.pid);
  if (time === undefined) throw new Error(`Patroni exited at once (${f.log})`);
  await record(f, spawned.pid, time);
  return { pid: spawned.pid, adopted: false, spawned };
}

/**
 * Stops the node's Patroni: SIGTERM, on which Patroni stops its PostgreSQL
 * (a fast shutdown) and, a leader, gives up the leader key, so another
 * member takes over at once rather than after the key's TTL; SIGKILL to
 * Patroni and its PostgreSQL after `timeoutMs`. Waits until both are gone.
 */
export async function stopPatroni(f: PatroniFiles, user: OsUser, timeoutMs = 60_000) {
  const st = await patroniStatus(f, user);
  if (st.up) {
    signalAll([st.pid], 'SIGTERM');
    const deadline = Date.now() + timeoutMs;
    while ((await isLive(st.pid)) && Date.now() < deadline) await sleep(100);
    if (await isLive(st.pid)) signalAll([st.pid], 'SIGKILL');
  }
  await killCluster(f.pgdata);
  await rm(f.state, { force: true });
}

/** Kills what runs in `pgdata` (a server orphaned by a killed Patroni) and waits until it is gone. */
async function killCluster(pgdata: string): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const pids = await clusterProcesses(pgdata);
    if (pids.length === 0) return;
    signalAll(pids, i === 0 ? 'SIGQUIT' : 'SIGKILL');
    await sleep(100);
  }
  throw new Error(`the processes of ${pgdata} do not exit`);
}
