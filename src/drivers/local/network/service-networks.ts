// A network namespace per OS user Basin runs tenants as: a service's user,
// and each read replica set's (docs/security.md, "A network of its own";
// docs/decisions.md, Service networks). Everything that runs as that user
// runs inside it (confine.ts), so no process of one tenant can listen
// where another service's clients connect: those connections are
// translated by the kernel, on the host, to the namespace they belong to
// (nft-table.ts), in every state of the service, running or not.
//
// The contract, for the rest of the driver and for what comes later (a
// pgBackRest TLS server per service on the host side of its namespace):
//
//   ensure(id)    makes (or mends) the namespace of `id` and returns it:
//                 `name`    basin-<installation>-<id>, `ip netns` style;
//                 `path`    /run/netns/<name>, what `nsenter --net=` takes;
//                 `address` the namespace's own address (its `eth0`),
//                           where its servers listen (and on 127.0.0.1);
//                 `hostAddress` the host side of its veth: its default
//                           gateway; connections from the host to the
//                           namespace (HAProxy's, host-local clients')
//                           arrive from it;
//                 `veth`    the host-side interface.
//                 The pair is a /31 of --service-network, unique in the
//                 installation, stable across restarts, reused after a
//                 delete.
//   get(id)       the same without any I/O, once recorded (else undefined).
//   forward(id, { ports, streamsFrom })
//                 the host ports that lead into the namespace (DNAT, same
//                 port), and for a read replica set the service it streams
//                 from (its connections to that service's namespace arrive
//                 from the service's own hostAddress).
//   reserveHostPorts(id, ports)
//                 ports on `hostAddress` that only this namespace (and the
//                 host itself) may reach; connections from other namespaces
//                 or other hosts are reset. A server the host runs for the
//                 namespace (listening on hostAddress:port) is reached by
//                 the namespace's processes at hostAddress:port, through
//                 their default route. Nothing else a namespace sends the
//                 host is filtered.
//   admitToHostPorts(id, guest, allowed)
//                 admits another namespace to those ports (a fork's, at its
//                 parent's repository server while it is made), or no longer.
//   park(id, ports)
//                 those of its ports lead to its hostAddress instead (the
//                 same port), where Basin's waker listens while the service
//                 is suspended (idle/); empty, they lead into it again.
//   remove(id)    the namespace, its veth and its entries go (after its
//                 last process: the delete of its service or set).
//   enabled       false with --service-network off, or where the host
//                 cannot (Basin not root, tools or kernel support missing):
//                 then get() is undefined, every process runs in the host's
//                 network, and a host-side server for a service has no
//                 gateway to listen on (loopback is what there is).
// `hostAddress` is on the host while the namespace exists: a server bound
// to it is bound after ensure(id), and goes before remove(id).
//
// All of it is recorded per id (records.ts) and outlives Basin, like the
// databases. Every change renders and loads the installation's whole table
// at once; changes are made one at a time.

import { readlink, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from '../../../lib/logger.js';
import { DriverError } from '../../driver.js';
import { HOST_NETWORK, type HbaSources, namespaceSources } from '../config/conf.js';
import { HostCheckError } from '../errors.js';
import { onPath, run } from '../host/exec.js';
import type { Layout } from '../layout.js';
import { mkdirIn } from '../node/node-files.js';
import { isRoot } from '../host/os-user.js';
import {
  type Block,
  capacity,
  lowestFreeSlot,
  namespaceName,
  namespacePath,
  pairOf,
  parseBlock,
  vethAlias,
  vethAliasOf,
  vethName,
} from './addresses.js';
import { dropUnusable, sweep, whyUnusable } from './at-start.js';
import { ensureForwarding } from './forwarding.js';
import { describeEntry, hostConflicts } from './host-routes.js';
import { ensureNamespace, hostVeths, isNamespace, removeNamespace } from './namespace.js';
import { dropTable, forwardedPorts, renderTable, tableName } from './nft-table.js';
import { type NetworkRecord, portList, readRecords, removeRecord, writeRecord } from './records.js';
import { ConnectRedirect } from './connect-redirect.js';
import { removeInstallationNetwork } from './remove-installation.js';

/** --service-network: a block (e.g. 198.18.0.0/15), or off. */
export type ServiceNetworkMode = string;

/** One namespace: see the contract above. */
export interface TenantNetwork {
  id: string;
  name: string;
  path: string;
  veth: string;
  address: string;
  hostAddress: string;
}

export interface ServiceNetworksOptions {
  layout: Layout;
  installation: string;
  mode: ServiceNetworkMode;
  log: Logger;
}

export class ServiceNetworks {
  private readonly ready = new Set<string>();
  private serial: Promise<unknown> = Promise.resolve();
  private applied: string | undefined;

  private constructor(
    private readonly o: ServiceNetworksOptions,
    private readonly block: Block | undefined,
    private readonly records: Map<string, NetworkRecord>,
    private readonly hostForwarded: boolean,
    /** Local clients' shortcut into the namespaces, or why the host has none. */
    private readonly redirect: ConnectRedirect | string = 'off',
  ) {}

  /** Off: every process runs in the host's network, as before namespaces. */
  static off(o: ServiceNetworksOptions): ServiceNetworks {
    return new ServiceNetworks(o, undefined, new Map(), true);
  }

  /**
   * Checks the host and prepares the installation's networks: off as
   * asked (its table, if an earlier start made one, goes: it would take
   * the services' ports from their servers), or with one WARNING where the
   * host cannot (Basin not root, tools or kernel support missing); a start
   * error (HostCheckError) when the block collides with the host's own
   * addresses or routes. Then what a deleted service left is swept, and
   * the table is loaded from the records.
   */
  static async start(o: ServiceNetworksOptions): Promise<ServiceNetworks> {
    if (o.mode === 'off') {
      if (isRoot() && onPath('nft')) await loadTable(o.layout, dropTable(o.installation));
      return ServiceNetworks.off(o);
    }
    let block: Block;
    try {
      block = parseBlock(o.mode);
    } catch (err) {
      throw new HostCheckError(`--service-network: ${(err as Error).message}.`);
    }
    const unusable = await whyUnusable(o.installation);
    if (unusable !== undefined) {
      o.log.warn(
        { reason: unusable },
        `WARNING: services share the host's network (${unusable}): a tenant's programs can listen ` +
          "on another service's ports while it is stopped, and receive its clients' connections. " +
          'Run Basin as root on a host with network namespaces, iproute2 and nftables to give each ' +
          'service a network of its own (docs/security.md), or set --service-network off to say so.',
      );
      return ServiceNetworks.off(o);
    }
    const records = await readRecords(o.layout);
    dropUnusable(block, records);
    await sweep(o, records);
    const ours = new Set(
      (await hostVeths())
        .filter((v) => vethAliasOf(v.alias)?.installation === o.installation)
        .map((v) => v.name),
    );
    const clashes = await hostConflicts(block, ours);
    if (clashes.length > 0) {
      throw new HostCheckError(
        `The service network ${block.cidr} (--service-network, BASIN_SERVICE_NETWORK) collides with ` +
          `this host's ${clashes.slice(0, 3).map(describeEntry).join(', ')}` +
          `${clashes.length > 3 ? ` and ${clashes.length - 3} more` : ''}: choose a block this host ` +
          "does not use (another Basin installation's included), or set it off.",
      );
    }
    const { hostForwarded } = await ensureForwarding();
    const redirect = ConnectRedirect.prepare(o);
    const networks = new ServiceNetworks(o, block, records, hostForwarded, redirect);
    await networks.serially(() => networks.apply());
    return networks;
  }

  get enabled(): boolean {
    return this.block !== undefined;
  }

  /** For the driver's start line. */
  describe(): string {
    if (!this.block) return 'off (the host network)';
    const local =
      typeof this.redirect === 'string'
        ? `local clients through NAT (${this.redirect})`
        : this.redirect.describe();
    return `${this.block.cidr}, ${this.hostForwarded ? 'the host forwards' : 'forwarding Basin only'}, ${local}`;
  }

  /** The namespace of `id` once recorded; undefined when off or not yet made. */
  get(id: string): TenantNetwork | undefined {
    const r = this.records.get(id);
    return this.block && r ? this.describeNet(id, r) : undefined;
  }

  /**
   * The listen addresses of `id`'s servers (PostgreSQL, PgBouncer): in its
   * namespace, its own address and loopback (none when `configured` is
   * empty: no TCP at all); without namespaces, `configured`.
   */
  listenAddresses(id: string, configured: string): string {
    if (!this.block || configured.trim() === '') return configured;
    return `${this.require(id).address},127.0.0.1`;
  }

  /** What `id`'s nodes admit beside their access rules (conf.ts, pgHba). */
  hbaSources(id: string): HbaSources {
    return this.block ? namespaceSources(this.require(id).hostAddress) : HOST_NETWORK;
  }

  /** Where this host (HAProxy, Basin) reaches `id`'s servers. */
  serverHost(id: string): string {
    return this.block ? this.require(id).address : '127.0.0.1';
  }

  /** Where the processes of `id` run when networks are on (whether it exists yet or not). */
  pathOf(id: string): string | undefined {
    return this.block ? namespacePath(namespaceName(this.o.installation, id)) : undefined;
  }

  /** Makes (or mends, the first time in this process) the namespace of `id`. */
  ensure(id: string): Promise<TenantNetwork> {
    return this.serially(() => this.ensureNow(id));
  }

  /** The host ports that lead into `id`'s namespace, and a read replica set's service. */
  forward(id: string, o: { ports: readonly number[]; streamsFrom?: string }): Promise<void> {
    return this.serially(async () => {
      await this.ensureNow(id);
      const ports = portList([...o.ports]) ?? [];
      const r = this.records.get(id) as NetworkRecord;
      // A port is one namespace's: one given to `id` leaves any other record.
      for (const [other, rec] of this.records) {
        if (other === id || !rec.ports.some((p) => ports.includes(p))) continue;
        await this.write(other, { ...rec, ports: rec.ports.filter((p) => !ports.includes(p)) });
      }
      const parked = (r.parked ?? []).filter((p) => ports.includes(p));
      const next: NetworkRecord = {
        slot: r.slot,
        ports,
        ...(parked.length === 0 ? {} : { parked }),
        ...(o.streamsFrom === undefined ? {} : { streamsFrom: o.streamsFrom }),
        hostPorts: r.hostPorts,
        ...(r.hostGuests === undefined ? {} : { hostGuests: r.hostGuests }),
      };
      if (JSON.stringify(next) !== JSON.stringify(r)) await this.write(id, next);
      await this.apply();
    });
  }

  /**
   * Parks exactly `ports` of `id`'s forwarded ports on its hostAddress
   * (the same port there): while a service is suspended, its clients reach
   * Basin's waker there, on the host's side (idle/). Empty: every port
   * leads into the namespace again. New connections follow at once;
   * established ones keep where they went (conntrack).
   */
  park(id: string, ports: readonly number[]): Promise<void> {
    return this.serially(async () => {
      await this.ensureNow(id);
      const r = this.records.get(id) as NetworkRecord;
      const parked = (portList([...ports]) ?? []).filter((p) => r.ports.includes(p));
      const { parked: _old, ...bare } = r;
      const next = parked.length > 0 ? { ...bare, parked } : bare;
      if (JSON.stringify(next) !== JSON.stringify(r)) await this.write(id, next);
      await this.apply();
    });
  }

  /** The ids whose records park some port (idle/ re-arms or releases them at start). */
  parkedIds(): string[] {
    return [...this.records].filter(([, r]) => (r.parked ?? []).length > 0).map(([id]) => id);
  }

  /** Exactly these ports on `id`'s hostAddress are reachable from its namespace (and the host) only. */
  reserveHostPorts(id: string, ports: readonly number[]): Promise<void> {
    return this.serially(async () => {
      await this.ensureNow(id);
      const r = this.records.get(id) as NetworkRecord;
      const hostPorts = portList([...ports]) ?? [];
      if (JSON.stringify(hostPorts) !== JSON.stringify(r.hostPorts)) {
        await this.write(id, { ...r, hostPorts });
      }
      await this.apply();
    });
  }

  /**
   * Admits `guest`'s namespace to the ports reserved on `id`'s hostAddress
   * (a fork's, while it restores from its parent's repository), or no
   * longer (`allowed` false). Recorded: it outlives a restart of Basin.
   */
  admitToHostPorts(id: string, guest: string, allowed: boolean): Promise<void> {
    return this.serially(async () => {
      await this.ensureNow(id);
      if (allowed) await this.ensureNow(guest);
      const r = this.records.get(id) as NetworkRecord;
      const rest = (r.hostGuests ?? []).filter((g) => g !== guest);
      const hostGuests = allowed ? [...rest, guest].sort() : rest;
      const { hostGuests: _old, ...bare } = r;
      const next = hostGuests.length > 0 ? { ...bare, hostGuests } : bare;
      if (JSON.stringify(next) !== JSON.stringify(r)) await this.write(id, next);
      await this.apply();
    });
  }

  /** Removes the namespace of `id`, its veth and its entries; nothing when they are gone. */
  remove(id: string): Promise<void> {
    return this.serially(async () => {
      const name = namespaceName(this.o.installation, id);
      // Off, there is one only if an earlier start made it.
      if (this.block || (await isNamespace(namespacePath(name)))) {
        await removeNamespace(name, vethName(this.o.installation, id));
      }
      this.ready.delete(id);
      const had = this.records.delete(id);
      await removeRecord(this.o.layout, id);
      if (had && this.block) await this.apply();
    });
  }

  /**
   * At shutdown: an installation that holds no namespace any more takes its
   * table away, and forwarding goes back off if Basin turned it on and no
   * other installation's table is left, so that a host where a Basin ran
   * with no service left is as it was before (the next start loads the
   * table again). With namespaces left, everything stays: their servers
   * outlive Basin, and their clients need the table.
   */
  closeIfUnused(): Promise<void> {
    return this.serially(async () => {
      if (!this.block || this.records.size > 0) return;
      removeInstallationNetwork(this.o.installation);
      this.applied = undefined;
      if (typeof this.redirect !== 'string') this.redirect.forget();
    });
  }

  /** Whether process `pid` runs in `id`'s namespace (always true when networks are off). */
  async holds(id: string, pid: number): Promise<boolean> {
    const path = this.pathOf(id);
    if (!path) return true;
    try {
      const [theirs, ns] = await Promise.all([readlink(`/proc/${pid}/ns/net`), stat(path)]);
      return theirs === `net:[${ns.ino}]`;
    } catch {
      return false;
    }
  }

  /** The recorded namespace of `id`; it must have been made (a bug otherwise). */
  private require(id: string): TenantNetwork {
    const net = this.get(id);
    if (!net) {
      throw new DriverError(
        `The network namespace of ${id} is not made yet (a bug in the local driver).`,
        false,
      );
    }
    return net;
  }

  private async ensureNow(id: string): Promise<TenantNetwork> {
    const block = this.block;
    if (!block)
      throw new DriverError('Service networks are off (a bug in the local driver).', false);
    let r = this.records.get(id);
    if (!r) {
      const used = new Set([...this.records.values()].map((x) => x.slot));
      const slot = lowestFreeSlot(block, used);
      if (slot === undefined) {
        throw new DriverError(
          `The service network ${block.cidr} has no room for another namespace (${capacity(block)} ` +
            'services and replica sets): an operator must give a larger --service-network.',
          false,
        );
      }
      r = { slot, ports: [], hostPorts: [] };
      await mkdirIn(this.o.layout.instanceDir(id), 0o711);
      await this.write(id, r);
    }
    const net = this.describeNet(id, r);
    if (!this.ready.has(id) || !(await isNamespace(net.path))) {
      try {
        await ensureNamespace({ ...net, alias: vethAlias(this.o.installation, id) });
      } catch (err) {
        throw new DriverError(
          `Could not make the network namespace ${net.name}: ${(err as Error).message}`,
          true,
        );
      }
      this.ready.add(id);
      this.o.log.debug({ id, netns: net.name, address: net.address }, 'network namespace ready');
      await this.apply();
    }
    return net;
  }

  private describeNet(id: string, r: NetworkRecord): TenantNetwork {
    const name = namespaceName(this.o.installation, id);
    return {
      id,
      name,
      path: namespacePath(name),
      veth: vethName(this.o.installation, id),
      ...pairOf(this.block as Block, r.slot),
    };
  }

  private async write(id: string, r: NetworkRecord): Promise<void> {
    await writeRecord(this.o.layout, id, r);
    this.records.set(id, r);
  }

  /** Loads the table the records describe, unless it is what was loaded last. */
  private async apply(): Promise<void> {
    const block = this.block as Block;
    const namespaces = [...this.records].map(([id, r]) => ({
      ...this.describeNet(id, r),
      ports: r.ports,
      ...(r.parked === undefined ? {} : { parked: r.parked }),
      ...(r.streamsFrom === undefined ? {} : { streamsFrom: r.streamsFrom }),
      hostPorts: r.hostPorts,
      ...(r.hostGuests === undefined ? {} : { hostGuests: r.hostGuests }),
    }));
    const text = renderTable({
      installation: this.o.installation,
      block: block.cidr,
      restrictForwarding: !this.hostForwarded,
      namespaces,
    });
    if (text === this.applied) return;
    try {
      await loadTable(this.o.layout, text);
    } catch (err) {
      throw new DriverError(
        `Could not load the nftables table ${tableName(this.o.installation)}: ${(err as Error).message}`,
        true,
      );
    }
    this.applied = text;
    // The same ports as the table's DNAT, to the same addresses.
    if (typeof this.redirect !== 'string') await this.redirect.sync(forwardedPorts(namespaces));
  }

  private serially<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.serial.then(fn, fn);
    this.serial = next.catch(() => undefined);
    return next;
  }
}

/** Loads `text` with `nft -f`, from a root-only file beside the instances (kept: what was loaded last). */
async function loadTable(layout: Layout, text: string): Promise<void> {
  const file = join(layout.root, 'network.nft');
  await writeFile(file, text, { mode: 0o600 });
  await run('nft', ['-f', file], { timeoutMs: 30_000 });
}
