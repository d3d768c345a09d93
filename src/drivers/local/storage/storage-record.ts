// What the storage watch knows of a service (or read replica set), in a
// file of root's beside its nodes (Layout.storageFile, 0600 in a root
// directory): its allowance, its nodes, its level and the usage that
// decided it, and the level its nodes were last converged to. A restarted
// Basin reads it before anything else, so a service held read-only, in
// recovery or stopped stays so from the first moment, before its first
// measurement ends.

import { chmod, readFile, rename, writeFile } from 'node:fs/promises';
import {
  STORAGE_LEVELS,
  type StopReason,
  type StorageLevel,
  type StorageUsage,
} from '../../../domain/storage.js';

export interface StorageRecord {
  kind: 'service' | 'replicaSet';
  allowance: number;
  nodes: number[];
  /** Whether it has a backup repository (a service) or not (a replica set). */
  repo: boolean;
  /** Whether its allowance grows with its size (StorageView.grows). */
  grows?: boolean;
  level: StorageLevel;
  why?: StopReason;
  usage?: StorageUsage;
  /** The level its nodes were last converged to (unknown: never). */
  applied?: StorageLevel;
}

const isLevel = (v: unknown): v is StorageLevel =>
  typeof v === 'string' && (STORAGE_LEVELS as readonly string[]).includes(v);
const isCount = (v: unknown): v is number => typeof v === 'number' && v >= 0 && isFinite(v);

/** The record, or undefined when there is none (or it is torn: measured again). */
export async function readStorageRecord(file: string): Promise<StorageRecord | undefined> {
  try {
    const raw = JSON.parse(await readFile(file, 'utf8')) as Partial<StorageRecord>;
    if (raw.kind !== 'service' && raw.kind !== 'replicaSet') return undefined;
    if (!isCount(raw.allowance) || !isLevel(raw.level) || !Array.isArray(raw.nodes)) {
      return undefined;
    }
    const usage = raw.usage;
    return {
      kind: raw.kind,
      allowance: raw.allowance,
      nodes: raw.nodes.filter((n): n is number => Number.isInteger(n) && n >= 0),
      repo: raw.repo === true,
      ...(typeof raw.grows === 'boolean' ? { grows: raw.grows } : {}),
      level: raw.level,
      ...(raw.why === 'limit' || raw.why === 'backups' || raw.why === 'lowDisk'
        ? { why: raw.why }
        : {}),
      ...(usage && isCount(usage.data) && isCount(usage.backups)
        ? { usage: { data: usage.data, backups: usage.backups } }
        : {}),
      ...(isLevel(raw.applied) ? { applied: raw.applied } : {}),
    };
  } catch {
    return undefined;
  }
}

/** Written aside and renamed: a crash leaves the old record or the new one. */
export async function writeStorageRecord(file: string, record: StorageRecord): Promise<void> {
  const tmp = `${file}.tmp`;
  await writeFile(tmp, `${JSON.stringify(record)}\n`, { mode: 0o600 });
  await chmod(tmp, 0o600);
  await rename(tmp, file);
}
