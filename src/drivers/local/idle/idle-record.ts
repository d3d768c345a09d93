// Basin's record of a suspended service: `instances/<id>/idle.json` (root
// 0600, beside its nodes): since when it sleeps, and the port its waker
// listens on. It outlives Basin, as the stopped server and the parked
// port of its namespace's table do, so a restarted Basin arms the waker
// again (idle-services.ts, adopt); it goes once the service is awake.

import { readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Layout } from '../layout.js';

export interface IdleRecord {
  /** When it was suspended (epoch ms). */
  since: number;
  /** The service's port, where its waker listens. */
  port: number;
  /** Its node (the primary's index). */
  node: number;
}

const file = (layout: Layout, id: string) => join(layout.instanceDir(id), 'idle.json');

export async function readIdleRecord(layout: Layout, id: string): Promise<IdleRecord | undefined> {
  try {
    const raw = JSON.parse(await readFile(file(layout, id), 'utf8')) as Partial<IdleRecord>;
    if (
      typeof raw.since !== 'number' ||
      !Number.isInteger(raw.port) ||
      (raw.port as number) < 1 ||
      (raw.port as number) > 65535
    ) {
      return undefined;
    }
    const node = Number.isInteger(raw.node) && (raw.node as number) >= 0 ? (raw.node as number) : 0;
    return { since: raw.since, port: raw.port as number, node };
  } catch {
    return undefined;
  }
}

/** Written aside and renamed: never half a record. */
export async function writeIdleRecord(layout: Layout, id: string, r: IdleRecord): Promise<void> {
  const f = file(layout, id);
  await writeFile(`${f}.tmp`, `${JSON.stringify(r)}\n`, { mode: 0o600 });
  await rename(`${f}.tmp`, f);
}

export async function removeIdleRecord(layout: Layout, id: string): Promise<void> {
  await rm(file(layout, id), { force: true });
}
