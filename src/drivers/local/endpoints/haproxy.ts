// The installation's HAProxy (Debian's, 2.6): the stable endpoint of every
// service with HA replicas (docs/architecture.md §9). One process per installation,
// run by Basin as the unprivileged `haproxy` OS user (Basin's own user when
// Basin is not root), detached like a postmaster so that it outlives Basin,
// and adopted through its pid file when Basin comes back.
//
// TCP mode: a client's PostgreSQL TLS session passes through untouched, to
// the node's own certificate (issued for the public host), so
// sslmode=verify-full works through the proxy as it does without one.
//
// Configuration: a global file, plus one file per proxied service in
// haproxy/services/ (HAProxy loads a directory's *.cfg files, sorted), so a
// service's frontend is written and removed on its own. Each service's
// frontend has all its nodes as servers, only the recorded primary enabled;
// every server is health-checked (TCP, every 500 ms) and sessions of a
// server marked down or put in maintenance are cut, so a client never
// keeps talking to a demoted node. A change of primary is applied at once
// through the runtime API (the stats socket); a change of frontends or
// servers by a seamless reload (master-worker mode, SIGUSR2): the new
// worker takes the listening sockets over, the old one finishes its
// sessions; the servers' states the old one checked are handed to it
// through the server-state file (haproxy-state.ts), which the frontends
// under Patroni load. https://docs.haproxy.org/2.6/management.html

import { spawn } from 'node:child_process';
import { closeSync, fchmodSync, openSync } from 'node:fs';
import { chmod, chown, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { createConnection } from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { nodeName } from '../../../domain/service-nodes.js';
import type { Logger } from '../../../lib/logger.js';
import { DriverError } from '../../driver.js';
import { asUser, childEnv, type Prelude, run, withPrelude } from '../host/exec.js';
import type { Layout } from '../layout.js';
import { exists, mkdirIn, writeRootFile } from '../node/node-files.js';
import { isRoot, readPasswd, type OsUser } from '../host/os-user.js';
import { isLive, procCmdline } from '../host/processes.js';
import { serverStateFile, statefulServers } from './haproxy-state.js';

/** How long ensureService (ensurePatroniService) waits for HAProxy's checks to see the servers up (a few check intervals). */
const UP_WAIT_MS = 5_000;

export interface ProxiedServer {
  index: number;
  /**
   * Where the node listens: its network namespace's address (nothing but
   * that namespace can listen there, whether the node runs or not), or
   * 127.0.0.1 where services share the host's network.
   */
  host: string;
  port: number;
  /** Only the primary takes connections. */
  enabled: boolean;
  /**
   * Not enabled, and its sessions left to end on their own (a read replica
   * set's node about to move: HAProxy's drain state) rather than cut at
   * once (maint: an old primary's must not go on writing).
   */
  drain?: boolean;
}

/**
 * How a frontend picks among its enabled servers: `first` (a service: its
 * primary is the only one enabled), `leastconn` (a read replica set: the
 * node with the fewest connections).
 */
export type Balance = 'first' | 'leastconn';

export interface HaproxyOptions {
  layout: Layout;
  /** PostgreSQL's listen_addresses, which the frontends bind alike ('*': every address). */
  listenAddresses: string;
  log: Logger;
  bin?: string;
  /**
   * How it starts (oom-scores.ts, protectedPrelude): every HA service's
   * endpoint goes through it, so it is protected from the OOM killer as
   * Basin is.
   */
  prelude?: Prelude;
}

/** Whether the host has HAProxy (HA replicas need it). */
export async function haproxyBinary(bin = '/usr/sbin/haproxy'): Promise<string | undefined> {
  return (await exists(bin)) ? bin : undefined;
}

export class Haproxy {
  private readonly dir: string;
  private readonly servicesDir: string;
  private readonly runDir: string;
  private readonly bin: string;
  /** The structure (binds and servers) of each service's file as the running worker loaded it. */
  private readonly loaded = new Map<string, string>();
  private serial: Promise<unknown> = Promise.resolve();

  constructor(private readonly o: HaproxyOptions) {
    this.dir = o.layout.haproxyDir;
    this.servicesDir = o.layout.haproxyServicesDir;
    this.runDir = join(this.dir, 'run');
    this.bin = o.bin ?? '/usr/sbin/haproxy';
  }

  private get globalConf() {
    return join(this.dir, 'haproxy.cfg');
  }
  private get pidFile() {
    return join(this.runDir, 'haproxy.pid');
  }
  private get statsSocket() {
    return join(this.runDir, 'stats.sock');
  }
  /** The servers' states the next worker starts from (haproxy-state.ts): root's, read by HAProxy's user. */
  private get stateFile() {
    return join(this.dir, 'server-state');
  }
  private serviceConf(id: string) {
    return join(this.servicesDir, `${id}.cfg`);
  }

  /**
   * Routes the service's `port` to its servers, only the enabled one
   * taking connections; starts HAProxy if it does not run. Resolves once
   * the running worker serves exactly this.
   */
  ensureService(
    id: string,
    port: number,
    servers: ProxiedServer[],
    admitted: readonly string[],
    balance: Balance = 'first',
  ): Promise<void> {
    return this.serially(async () => {
      await this.prepare();
      const { text, structure } = renderService(
        id,
        port,
        servers,
        this.o.listenAddresses,
        admitted,
        balance,
      );
      const file = this.serviceConf(id);
      const before = await readFile(file, 'utf8').catch(() => undefined);
      if (before !== text) await writeAtomically(file, text, 0o644);
      const pid = await this.running();
      if (pid === undefined) {
        await this.spawn();
      } else if (this.loaded.get(id) !== structure) {
        await this.reload(pid);
      }
      this.loaded.set(id, structure);
      // The primary, at once, whatever the worker loaded: a failover does not wait for a reload.
      const backend = backendName(id);
      // Its address first (a reload already loaded it; sessions already
      // led to the old one go on), then its state. A draining server keeps
      // the address its sessions use: checked at a new one where nothing
      // runs yet, it would be marked down and its sessions cut.
      const commands = servers.flatMap((s) => {
        const server = `${backend}/${nodeName(s.index)}`;
        if (!s.enabled && s.drain) return [`set server ${server} state drain`];
        return [
          `set server ${server} addr ${s.host} port ${s.port}`,
          ...(s.enabled
            ? [`set server ${server} state ready`]
            : [`set server ${server} state maint`, `shutdown sessions server ${server}`]),
        ];
      });
      await this.command(commands.join(';'));
      await this.untilUp(
        backend,
        servers.filter((s) => s.enabled).map((s) => nodeName(s.index)),
      );
    });
  }

  /**
   * Waits until HAProxy's health check has each of `names` up: a server the
   * check marked down (its node was stopped) is not made up by `state
   * ready`, only by its next check (every 500 ms), and until then a client
   * is accepted and cut at once. The service is not READY before its
   * endpoint serves. Bounded: a node that is not reachable yet is the
   * caller's to find out; this never fails.
   */
  private async untilUp(backend: string, names: string[]): Promise<void> {
    if (names.length === 0) return;
    for (const deadline = Date.now() + UP_WAIT_MS; ;) {
      const stat = await this.command('show stat').catch(() => '');
      const up = new Set(
        stat
          .split('\n')
          .map((line) => line.split(','))
          .filter((f) => f[0] === backend && /^(UP|no check)/.test(f[17] ?? ''))
          .map((f) => f[1]),
      );
      if (names.every((n) => up.has(n))) return;
      if (Date.now() > deadline) {
        this.o.log.warn(
          { backend, servers: names },
          "HAProxy does not see the service's primary up yet",
        );
        return;
      }
      await sleep(50);
    }
  }

  /**
   * Routes the service's `port` to whichever of its nodes across hosts
   * Patroni says is the primary (haproxy-patroni.ts: HAProxy's own checks,
   * no server enabled by Basin); starts HAProxy if it does not run.
   * Resolves once the running worker serves this configuration.
   */
  ensurePatroniService(id: string, text: string): Promise<void> {
    return this.serially(async () => {
      await this.prepare();
      const file = this.serviceConf(id);
      const before = await readFile(file, 'utf8').catch(() => undefined);
      if (before !== text) await writeAtomically(file, text, 0o644);
      const pid = await this.running();
      const fresh = pid === undefined || this.loaded.get(id) !== text;
      if (pid === undefined) await this.spawn();
      else if (fresh) await this.reload(pid);
      this.loaded.set(id, text);
      if (fresh) await this.untilChecked(backendName(id));
    });
  }

  /**
   * Waits until the new worker routes the service's port: one of its
   * servers up, or every one checked once (no primary then: Patroni has
   * no leader yet). Its servers that the last worker checked as they are
   * configured now kept their states; any other started down
   * (haproxy-state.ts), and is up only once its first check passes, a
   * moment after the worker starts. Bounded, like untilUp: a node not
   * reachable yet is the caller's to find out; this never fails.
   */
  private async untilChecked(backend: string): Promise<void> {
    for (const deadline = Date.now() + UP_WAIT_MS; ;) {
      const stat = await this.command('show stat').catch(() => '');
      const servers = stat
        .split('\n')
        .map((line) => line.split(','))
        .filter((f) => f[0] === backend && f[1] !== 'FRONTEND' && f[1] !== 'BACKEND');
      const up = servers.some((f) => /^UP/.test(f[17] ?? ''));
      // check_status: INI (or UNK) until the server's first check is done; "* " while one runs.
      const unchecked = servers.some((f) => /^(\* )?(INI|UNK)/.test(f[36] ?? ''));
      if (servers.length > 0 && (up || !unchecked)) return;
      if (Date.now() > deadline) {
        this.o.log.warn({ backend }, "HAProxy has not checked the service's nodes yet");
        return;
      }
      await sleep(50);
    }
  }

  /** The directory of HAProxy's own files (its checks' client certificate goes there). */
  get home(): string {
    return this.dir;
  }

  /** HAProxy's OS user: what may read its checks' client certificate. */
  get osUser(): OsUser {
    return this.user();
  }

  /** Stops routing the service's port (the port is free once the reload is done). */
  removeService(id: string): Promise<void> {
    return this.serially(async () => {
      const file = this.serviceConf(id);
      this.loaded.delete(id);
      if (!(await exists(file))) return;
      await rm(file, { force: true });
      const pid = await this.running();
      if (pid === undefined) return;
      if ((await this.serviceIds()).length === 0) {
        await this.stop(pid);
      } else {
        await this.reload(pid);
      }
    });
  }

  /** Starts HAProxy again if services need it and it died (the driver's watchdog calls this). */
  supervise(): Promise<void> {
    return this.serially(async () => {
      if ((await this.serviceIds()).length === 0) return;
      if ((await this.running()) !== undefined) return;
      this.o.log.warn({}, 'HAProxy is not running; starting it');
      this.loaded.clear();
      await this.prepare();
      await this.spawn();
    });
  }

  /** Whether service `id` is routed by the proxy. */
  hasService(id: string): Promise<boolean> {
    return exists(this.serviceConf(id));
  }

  private serially<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.serial.then(fn, fn);
    this.serial = next.catch(() => undefined);
    return next;
  }

  private serviceIds(): Promise<string[]> {
    return frontendIds(this.o.layout);
  }

  private async prepare(): Promise<void> {
    const user = this.user();
    await mkdirIn(this.dir, 0o711);
    await mkdirIn(this.servicesDir, 0o755);
    await mkdirIn(this.runDir, 0o700);
    if (isRoot()) await chown(this.runDir, user.uid, user.gid);
    const global = renderGlobal(this.statsSocket, this.stateFile);
    if ((await readFile(this.globalConf, 'utf8').catch(() => '')) !== global) {
      await writeAtomically(this.globalConf, global, 0o644);
    }
  }

  /** The haproxy OS user when Basin is root (Debian's package makes it); Basin's own otherwise. */
  private user(): OsUser {
    if (!isRoot()) {
      return { name: 'basin', uid: process.getuid?.() ?? -1, gid: process.getgid?.() ?? -1 };
    }
    const entry = readPasswd().find((u) => u.name === 'haproxy');
    if (!entry) {
      throw new DriverError(
        'HA replicas need HAProxy: install Debian\'s "haproxy" package (scripts/setup-host.sh).',
        false,
      );
    }
    return entry;
  }

  /** The master's pid when the installation's HAProxy runs. */
  private async running(): Promise<number | undefined> {
    let pid: number;
    try {
      pid = Number((await readFile(this.pidFile, 'utf8')).trim().split('\n')[0]);
    } catch {
      return undefined;
    }
    if (!Number.isInteger(pid) || pid <= 0 || !(await isLive(pid))) return undefined;
    const argv = await procCmdline(pid);
    return argv.includes(this.globalConf) ? pid : undefined;
  }

  private args(): string[] {
    return ['-W', '-f', this.globalConf, '-f', this.servicesDir, '-p', this.pidFile];
  }

  private async check(): Promise<void> {
    try {
      await run(this.bin, ['-c', '-q', ...this.args()], { timeoutMs: 10_000 });
    } catch (err) {
      throw new DriverError(`HAProxy refuses its configuration: ${(err as Error).message}`, true);
    }
  }

  private async spawn(): Promise<void> {
    await this.check();
    await rm(this.pidFile, { force: true });
    await this.saveServerStates(false);
    const logFile = join(this.dir, 'haproxy.log');
    const fd = openSync(logFile, 'a', 0o600);
    try {
      fchmodSync(fd, 0o600);
      const cmd = withPrelude(this.o.prelude ?? {}, asUser(this.user(), this.bin, this.args()));
      const child = spawn(cmd.file, cmd.args, {
        cwd: this.dir,
        detached: true,
        stdio: ['ignore', fd, fd],
        env: childEnv(),
      });
      child.on('error', () => {});
      child.unref();
    } finally {
      closeSync(fd);
    }
    const deadline = Date.now() + 10_000;
    while ((await this.workerPid()) === undefined) {
      if (Date.now() > deadline) {
        throw new DriverError(`HAProxy did not start; see ${logFile}`, true);
      }
      await sleep(20);
    }
    this.o.log.info({ pid: await this.running() }, 'started HAProxy');
  }

  /** A seamless reload: resolves once a new worker serves the new configuration. */
  private async reload(masterPid: number): Promise<void> {
    await this.check();
    const before = await this.workerPid();
    await this.saveServerStates(true);
    process.kill(masterPid, 'SIGUSR2');
    const deadline = Date.now() + 10_000;
    for (;;) {
      const now = await this.workerPid();
      if (now !== undefined && now !== before) return;
      if (Date.now() > deadline) throw new DriverError('HAProxy did not reload in time.', true);
      await sleep(10);
    }
  }

  /**
   * Writes the state file the next worker loads (haproxy-state.ts): the
   * running worker's states of the servers it checks as they are
   * configured now (`running`: there is one to ask), every other server
   * down. Just before the reload, so that what it says is at most a moment
   * old; a state that changes meanwhile (a failover) is the new worker's
   * checks' to follow, as they would without a reload. No worker answering
   * is no state kept: every server starts down, a moment without a route
   * rather than a route to a standby.
   */
  private async saveServerStates(running: boolean): Promise<void> {
    const dump = running
      ? await this.command('show servers state', 5_000).catch((err: Error) => {
          this.o.log.warn(
            { err: err.message },
            "HAProxy did not tell its servers' states: every server starts down",
          );
          return '';
        })
      : '';
    const configs = await Promise.all(
      (await this.serviceIds()).map((id) => readFile(this.serviceConf(id), 'utf8').catch(() => '')),
    );
    await writeRootFile(
      this.stateFile,
      serverStateFile(dump, statefulServers(configs)),
      this.user(),
    );
  }

  private async stop(masterPid: number): Promise<void> {
    process.kill(masterPid, 'SIGUSR1'); // soft stop: sessions finish, listeners close now
    this.loaded.clear();
    const deadline = Date.now() + 5_000;
    while (await isLive(masterPid)) {
      if (Date.now() > deadline) {
        process.kill(masterPid, 'SIGTERM');
        break;
      }
      await sleep(20);
    }
    this.o.log.info({}, 'stopped HAProxy: no service needs it');
  }

  /** The current worker's pid, from its own stats socket; undefined while none answers. */
  private async workerPid(): Promise<number | undefined> {
    try {
      const info = await this.command('show info');
      const pid = /^Pid: (\d+)$/m.exec(info)?.[1];
      return pid === undefined ? undefined : Number(pid);
    } catch {
      return undefined;
    }
  }

  /** Runs commands (separated by ';') on the worker's stats socket and returns its answer. */
  private command(line: string, timeoutMs = 2_000): Promise<string> {
    return new Promise((resolve, reject) => {
      const sock = createConnection(this.statsSocket);
      let out = '';
      const timer = setTimeout(() => {
        sock.destroy();
        reject(new DriverError('HAProxy did not answer on its stats socket.', true));
      }, timeoutMs);
      sock.setEncoding('utf8');
      sock.on('connect', () => sock.end(`${line}\n`));
      sock.on('data', (d: string) => (out += d));
      sock.on('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
      sock.on('close', () => {
        clearTimeout(timer);
        resolve(out);
      });
    });
  }

  /** Stops HAProxy and removes its files (tests; never in normal operation). */
  async destroy(): Promise<void> {
    const pid = await this.running();
    if (pid !== undefined) await this.stop(pid);
    await rm(this.dir, { recursive: true, force: true });
  }

  /** Whether its directory holds anything (tests check it is cleaned up). */
  async isRunning(): Promise<boolean> {
    return (await this.running()) !== undefined;
  }
}

const backendName = (id: string) => `svc_${id}`;

/**
 * The global part: master-worker mode, the workers' stats socket (the
 * runtime API, admin level, for Basin alone: its directory is HAProxy's
 * user's, 0700), the servers' state file (root's, read by HAProxy's user:
 * haproxy-state.ts), TCP mode for everything, and one listener of its own
 * (HAProxy will not run without one).
 */
export function renderGlobal(statsSocket: string, stateFile: string): string {
  return [
    '# Written by Basin; edits are overwritten.',
    'global',
    `    stats socket ${statsSocket} mode 600 level admin expose-fd listeners`,
    '    stats timeout 10s',
    // Written before each start and reload (haproxy-state.ts); loaded by the
    // frontends that say so (haproxy-patroni.ts), no other.
    `    server-state-file ${stateFile}`,
    '',
    'defaults',
    '    mode tcp',
    '    load-server-state-from-file none',
    '    timeout connect 2s',
    // PostgreSQL sessions sit idle for long (pools, psql): only a dead peer ends one.
    '    timeout client 24h',
    '    timeout server 24h',
    '    timeout check 1s',
    '',
    'listen basin',
    `    bind unix@${statsSocket.replace(/stats\.sock$/, 'alive.sock')} mode 600`,
    '',
  ].join('\n');
}

/**
 * One service's frontend and servers. `structure` is what needs a reload
 * when it changes (binds, servers, ports); which server is enabled is
 * applied through the runtime API.
 */
export function renderService(
  id: string,
  port: number,
  servers: ProxiedServer[],
  listenAddresses: string,
  admitted: readonly string[],
  balance: Balance = 'first',
): { text: string; structure: string } {
  const binds = bindLines(port, listenAddresses);
  const head = [
    `# ${id}: written by Basin; edits are overwritten.`,
    `listen ${backendName(id)}`,
    ...binds,
    '    mode tcp',
    ...admissionLines(admitted),
    `    balance ${balance}`,
    '    option tcpka',
    // No retry: HAProxy waits a second before retrying a server that
    // refused, which is a second added to every failover; the client
    // retries at once, and by then a refusing server is marked down.
    '    retries 0',
    '    default-server inter 500ms fastinter 250ms downinter 500ms fall 2 rise 1 on-marked-down shutdown-sessions observe layer4 error-limit 1 on-error mark-down',
  ];
  const line = (s: ProxiedServer) =>
    `    server ${nodeName(s.index)} ${s.host}:${s.port} check${!s.enabled ? ' disabled' : ''}`;
  // Neither a server's state nor its address is structure: both change
  // through the runtime API (ensureService), without a reload, whose
  // handover of the listening socket can drop a connection being accepted
  // (a read replica set's node moving to another host changes its address).
  const shape = (s: ProxiedServer) => `    server ${nodeName(s.index)} check`;
  const sorted = [...servers].sort((a, b) => a.index - b.index);
  return {
    text: [...head, ...sorted.map(line), ''].join('\n'),
    structure: [...head, ...sorted.map(shape)].join('\n'),
  };
}

/**
 * Who may connect, checked here: behind the proxy every node sees its
 * clients as the proxy (TCP mode, and PostgreSQL reads no PROXY header), so
 * a service's access rules (its VPC's blocks, or the public CIDRs) are
 * enforced at the frontend, before a byte reaches a node (conf.ts, pgHba).
 */
export function admissionLines(admitted: readonly string[]): string[] {
  if (admitted.includes('0.0.0.0/0') && admitted.includes('::/0')) return [];
  if (admitted.length === 0) return ['    tcp-request connection reject'];
  return [`    tcp-request connection reject unless { src ${admitted.join(' ')} }`];
}

export function bindLines(port: number, listenAddresses: string): string[] {
  const addrs = listenAddresses
    .split(',')
    .map((a) => a.trim())
    .filter(Boolean);
  if (addrs.includes('*')) return [`    bind :::${port} v4v6`];
  return addrs.map((a) =>
    a.includes(':')
      ? `    bind ipv6@${a}:${port} v6only`
      : `    bind ${a === 'localhost' ? '127.0.0.1' : a}:${port}`,
  );
}

async function writeAtomically(path: string, text: string, mode: number): Promise<void> {
  const tmp = `${path}.tmp`;
  await writeFile(tmp, text, { mode });
  await chmod(tmp, mode);
  await rename(tmp, path);
}

/** The services and sets this host's HAProxy has a frontend of (a `services/<id>.cfg` each). */
export async function frontendIds(layout: Layout): Promise<string[]> {
  try {
    return (await readdir(layout.haproxyServicesDir))
      .filter((n) => n.endsWith('.cfg'))
      .map((n) => n.slice(0, -4));
  } catch {
    return [];
  }
}
