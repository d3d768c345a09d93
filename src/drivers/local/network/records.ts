// Basin's record of a namespace: `instances/<id>/network.json` (root 0600),
// beside the nodes it serves, so it goes with them. It holds the slot of
// the block (which pair of addresses: addresses.ts), the host ports that
// lead into it, a read replica set's service, and the host-side ports
// reserved for it (with the namespaces admitted to them meanwhile). A restarted Basin reads every record (readRecords) and
// renders its table from them; the namespaces, veths and table outlive
// Basin, as the databases do.

import { readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Layout } from '../layout.js';

export interface NetworkRecord {
  slot: number;
  /** Host ports that lead into the namespace (sorted, unique). */
  ports: number[];
  /** Of those, the ports parked on the host side (a suspended service's waker: idle/). */
  parked?: number[];
  /** A read replica set's service. */
  streamsFrom?: string;
  /** Ports on the namespace's hostAddress reserved for it (sorted, unique). */
  hostPorts: number[];
  /** Other namespaces (their ids) admitted to those ports too, for a while: a fork's, at its parent's repository. */
  hostGuests?: string[];
}

const ID = /^[a-z0-9]{1,32}$/;

export const recordFile = (layout: Layout, id: string) =>
  join(layout.instanceDir(id), 'network.json');

/** The record of `id`, or undefined when it has none (or an unreadable one). */
export async function readRecord(layout: Layout, id: string): Promise<NetworkRecord | undefined> {
  try {
    return parseRecord(await readFile(recordFile(layout, id), 'utf8'));
  } catch {
    return undefined;
  }
}

/** Every record under the instances directory, by id. */
export async function readRecords(layout: Layout): Promise<Map<string, NetworkRecord>> {
  const out = new Map<string, NetworkRecord>();
  let ids: string[];
  try {
    ids = await readdir(layout.instancesDir);
  } catch {
    return out;
  }
  for (const id of ids.filter((i) => ID.test(i))) {
    const r = await readRecord(layout, id);
    if (r) out.set(id, r);
  }
  return out;
}

/** Writes the record (aside, then renamed: never half a file); the instance directory must exist. */
export async function writeRecord(layout: Layout, id: string, r: NetworkRecord): Promise<void> {
  const file = recordFile(layout, id);
  const tmp = `${file}.tmp`;
  await writeFile(tmp, `${JSON.stringify(r)}\n`, { mode: 0o600 });
  await rename(tmp, file);
}

export async function removeRecord(layout: Layout, id: string): Promise<void> {
  await rm(recordFile(layout, id), { force: true });
}

/** A record's text, checked field by field: it is Basin's own file, but a torn or edited one must not load. */
export function parseRecord(text: string): NetworkRecord | undefined {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof raw !== 'object' || raw === null) return undefined;
  const o = raw as Record<string, unknown>;
  if (!Number.isInteger(o.slot) || (o.slot as number) < 0) return undefined;
  const ports = portList(o.ports);
  const hostPorts = portList(o.hostPorts ?? []);
  const parked = portList(o.parked ?? []);
  if (!ports || !hostPorts || !parked) return undefined;
  const guests = o.hostGuests;
  if (
    guests !== undefined &&
    !(Array.isArray(guests) && guests.every((g) => typeof g === 'string' && ID.test(g)))
  ) {
    return undefined;
  }
  if (
    o.streamsFrom !== undefined &&
    !(typeof o.streamsFrom === 'string' && ID.test(o.streamsFrom))
  ) {
    return undefined;
  }
  return {
    slot: o.slot as number,
    ports,
    ...(parked.length === 0 ? {} : { parked }),
    ...(o.streamsFrom === undefined ? {} : { streamsFrom: o.streamsFrom }),
    hostPorts,
    ...(guests === undefined || guests.length === 0 ? {} : { hostGuests: guests as string[] }),
  };
}

/** Ports sorted and unique; undefined for anything but a list of TCP ports. */
export function portList(value: unknown): number[] | undefined {
  if (!Array.isArray(value)) return undefined;
  if (!value.every((p) => Number.isInteger(p) && (p as number) > 0 && (p as number) < 65536)) {
    return undefined;
  }
  return [...new Set(value as number[])].sort((a, b) => a - b);
}
