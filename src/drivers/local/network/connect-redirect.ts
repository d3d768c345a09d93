// Local clients straight into a service's namespace, at connect(2).
//
// A client on this host reaches a service through nftables (nft-table.ts):
// its connection to 127.0.0.1:<port> is translated to <the namespace's
// address>:<port> in `output`, and its loopback source masqueraded to the
// namespace's gateway. That translation is paid on every packet (connection
// tracking's NAT of both directions, the re-route after `output`), and it
// was most of what namespaces cost a direct connection (bench/README.md,
// local-netns: +7.6 % CPU a transaction through the endpoint, +2.5 % to the
// namespace's address).
//
// So where the host can, an eBPF program (connect4.bpf.c), attached to the
// root of the cgroup v2 hierarchy (so to every process of the host), gives
// such a connect the namespace's address before any packet exists: the
// kernel routes it over the veth with the veth's own source address (the
// gateway, as the masquerade made it), and nothing is translated. Only
// sockets of the host's network namespace are touched, only TCP, only
// 127.0.0.0/8, only the ports this installation leads into a namespace
// (its map, kept equal to the nftables table's ports). The translation
// stays for every other client (another host, a namespace, the host's
// other addresses) and takes over if the program goes.
//
// Its security is the translation's: it leads to the same address and
// port, which only the service's own processes can listen on (its
// namespace). A tenant's process runs in its own namespace, where the
// program changes nothing.
//
// The program and its map are pinned in bpffs (/sys/fs/bpf/basin-<tag>/),
// so that they outlive Basin as the namespaces and the table do (a killed
// Basin's services keep their clients); a start loads them afresh and
// fills the map again; removeInstallationNetwork removes them, and a start
// removes those of installations whose table is gone. Needs root, bpftool,
// a cgroup v2 hierarchy, a little-endian host and dist/bpf/connect4.o
// (scripts/build-bpf.mjs, with clang); without any of them Basin says why
// at start and local clients go through the translation.

import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { endianness } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Logger } from '../../../lib/logger.js';
import { onPath, run } from '../host/exec.js';
import { isRoot } from '../host/os-user.js';

const BPFFS = '/sys/fs/bpf';
const PIN_PREFIX = 'basin-';

/** The compiled program: beside dist/ (Basin as built), or the checkout's dist/ (tests run from src/). */
const OBJECTS = ['../../../bpf/connect4.o', '../../../../dist/bpf/connect4.o'].map((p) =>
  fileURLToPath(new URL(p, import.meta.url)),
);

/** Where `installation`'s program and map are pinned. */
const pinDir = (installation: string) => join(BPFFS, `${PIN_PREFIX}${installation}`);

export class ConnectRedirect {
  /** Port → address, as the map holds it now; undefined until loaded. */
  private loaded: Map<number, string> | undefined;
  /** Why it failed in this process, if it did: it is not tried again until Basin restarts. */
  private failed: string | undefined;

  private constructor(
    private readonly installation: string,
    private readonly object: string,
    private readonly cgroup: string,
    private readonly log: Logger,
  ) {}

  /**
   * Prepares the redirect of `installation`, or says why the host cannot
   * have it (a string: for the driver's start line). Removes what
   * installations whose table is gone left pinned.
   */
  static prepare(o: { installation: string; log: Logger }): ConnectRedirect | string {
    const why = whyUnavailable();
    if (typeof why === 'string') return why;
    sweepOrphans(o.installation);
    return new ConnectRedirect(o.installation, why.object, why.cgroup, o.log);
  }

  /**
   * Makes the map lead `ports` (port → the namespace's address) and nothing
   * else, loading and attaching the program first if it is not (this
   * process's first call, or after forget). A failure takes the program
   * away (the translation serves) and is logged, never thrown: a local
   * client is slower without it, never refused.
   */
  async sync(ports: ReadonlyMap<number, string>): Promise<void> {
    if (this.failed !== undefined) return;
    try {
      if (!this.loaded) await this.load();
      const now = this.loaded as Map<number, string>;
      const lines: string[] = [];
      const map = join(pinDir(this.installation), 'ports');
      for (const port of now.keys()) {
        if (!ports.has(port)) lines.push(`map delete pinned ${map} key ${portKey(port)}`);
      }
      for (const [port, address] of ports) {
        if (now.get(port) !== address) {
          lines.push(
            `map update pinned ${map} key ${portKey(port)} value ${addressValue(address)}`,
          );
        }
      }
      if (lines.length === 0) return;
      // One bpftool for every change, its commands on stdin.
      await run('bpftool', ['batch', 'file', '-'], {
        timeoutMs: 30_000,
        input: `${lines.join('\n')}\n`,
      });
      this.loaded = new Map(ports);
    } catch (err) {
      this.failed = (err as Error).message;
      this.log.warn(
        { err: this.failed },
        'WARNING: the redirect of local clients into service namespaces failed: until Basin restarts, they go through NAT',
      );
      removeConnectRedirect(this.installation);
      this.loaded = undefined;
    }
  }

  /** For the driver's start line. */
  describe(): string {
    return this.failed === undefined
      ? 'local clients redirected at connect (eBPF)'
      : `local clients through NAT (${this.failed})`;
  }

  /** Its pins were removed (removeInstallationNetwork): the next sync loads it again. */
  forget(): void {
    this.loaded = undefined;
  }

  /** Loads the program afresh (a pinned one of an earlier start goes first) and attaches it. */
  private async load(): Promise<void> {
    const dir = pinDir(this.installation);
    removeConnectRedirect(this.installation);
    await mkdir(dir, { recursive: true, mode: 0o700 });
    await run('bpftool', [
      'prog', 'load', this.object, join(dir, 'connect4'), 'type', 'cgroup/connect4',
      'pinmaps', dir,
    ]); // prettier-ignore
    await run('bpftool', [
      'cgroup', 'attach', this.cgroup, 'connect4', 'pinned', join(dir, 'connect4'), 'multi',
    ]); // prettier-ignore
    this.loaded = new Map();
  }
}

/**
 * Detaches and unpins `installation`'s program and map, if any. Synchronous,
 * for removeInstallationNetwork (exit handlers cannot wait for a promise).
 */
export function removeConnectRedirect(installation: string): void {
  const dir = pinDir(installation);
  if (!existsSync(dir)) return;
  const cgroup = cgroup2Root();
  if (cgroup && existsSync(join(dir, 'connect4'))) {
    try {
      execFileSync(
        'bpftool',
        ['cgroup', 'detach', cgroup, 'connect4', 'pinned', join(dir, 'connect4')],
        {
          stdio: 'pipe',
        },
      );
    } catch {
      // not attached (a load that failed half-way), or no bpftool: the unpin frees it
    }
  }
  rmSync(dir, { recursive: true, force: true });
}

/** Removes the pins of other installations whose nftables table is gone (a data directory deleted under a live host). */
function sweepOrphans(ours: string): void {
  let tables: string;
  try {
    tables = execFileSync('nft', ['list', 'tables', 'ip'], { encoding: 'utf8' });
  } catch {
    return;
  }
  for (const name of readdirSync(BPFFS)) {
    if (!name.startsWith(PIN_PREFIX)) continue;
    const installation = name.slice(PIN_PREFIX.length);
    if (installation === ours) continue;
    if (!new RegExp(`^table ip basin-${installation}$`, 'm').test(tables)) {
      removeConnectRedirect(installation);
    }
  }
}

/** What the host lacks for the redirect, or the object and cgroup to use. */
function whyUnavailable(): string | { object: string; cgroup: string } {
  if (!isRoot()) return 'Basin is not root';
  if (endianness() !== 'LE') return 'a big-endian host';
  const object = OBJECTS.find((o) => existsSync(o));
  if (!object) return 'no dist/bpf/connect4.o (npm run build makes it with clang)';
  if (!onPath('bpftool')) return 'no bpftool';
  const cgroup = cgroup2Root();
  if (!cgroup) return 'no cgroup v2 hierarchy';
  if (!bpffsMounted()) {
    try {
      execFileSync('mount', ['-t', 'bpf', 'bpf', BPFFS], { stdio: 'pipe' });
    } catch (err) {
      return `bpffs could not be mounted at ${BPFFS}: ${(err as Error).message}`;
    }
  }
  return { object, cgroup };
}

/** The mount point of the cgroup v2 hierarchy (/sys/fs/cgroup, or /sys/fs/cgroup/unified beside v1). */
function cgroup2Root(): string | undefined {
  return mountsOf('cgroup2')[0];
}

function bpffsMounted(): boolean {
  return mountsOf('bpf').includes(BPFFS);
}

/** Mount points of file systems of `type`, from /proc/self/mounts. */
function mountsOf(type: string): string[] {
  try {
    return readFileSync('/proc/self/mounts', 'utf8')
      .split('\n')
      .map((line) => line.split(' '))
      .filter((f) => f[2] === type && f[1] !== undefined)
      .map((f) => f[1] as string);
  } catch {
    return [];
  }
}

/** A port as the map's key: a u32 in host (little-endian) order, as bytes. */
export function portKey(port: number): string {
  return [port & 0xff, port >> 8, 0, 0].join(' ');
}

/** An IPv4 address as the map's value: network order, its bytes as written. */
export function addressValue(address: string): string {
  return address.split('.').map(Number).join(' ');
}
