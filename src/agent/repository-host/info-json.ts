// The complete full backups of a stanza from `pgbackrest info --output=json`
// (the repository host's repositories are encrypted, so their backup.info
// is read by pgBackRest, not parsed from the file as on one machine). The
// same shape and rules as config/pgbackrest.ts parseBackupInfo: errored or
// malformed entries are skipped; `stoppedAt` is the second after the end.

import type { RepoBackup } from '../../drivers/local/config/pgbackrest.js';

const LABEL = /^\d{8}-\d{6}F$/;
const SEGMENT = /^[0-9A-F]{24}$/;

interface InfoBackup {
  label?: unknown;
  type?: unknown;
  error?: unknown;
  timestamp?: { start?: unknown; stop?: unknown };
  archive?: { start?: unknown; stop?: unknown };
}

export function parseInfoJson(text: string, stanza: string): RepoBackup[] {
  let stanzas: unknown;
  try {
    stanzas = JSON.parse(text);
  } catch {
    return [];
  }
  if (!Array.isArray(stanzas)) return [];
  const mine = stanzas.find((s: { name?: unknown }) => s?.name === stanza) as
    { backup?: unknown } | undefined;
  const out: RepoBackup[] = [];
  for (const b of Array.isArray(mine?.backup) ? (mine.backup as InfoBackup[]) : []) {
    const start = b.timestamp?.start;
    const stop = b.timestamp?.stop;
    const walStart = b.archive?.start;
    const walStop = b.archive?.stop;
    if (
      typeof b.label !== 'string' ||
      !LABEL.test(b.label) ||
      b.type !== 'full' ||
      b.error === true ||
      !Number.isSafeInteger(start) ||
      !Number.isSafeInteger(stop) ||
      (stop as number) < (start as number) ||
      typeof walStart !== 'string' ||
      typeof walStop !== 'string' ||
      !SEGMENT.test(walStart) ||
      !SEGMENT.test(walStop)
    ) {
      continue;
    }
    out.push({
      label: b.label,
      startedAt: new Date((start as number) * 1000).toISOString(),
      stoppedAt: new Date(((stop as number) + 1) * 1000).toISOString(),
      walStart,
      walStop,
    });
  }
  return out.sort((a, b) => (a.label < b.label ? -1 : 1));
}

/**
 * The system identifier the stanza's current database has in the same
 * output (as backup.info's `[db]` gives it, config/pgbackrest.ts
 * backupInfoSystemId): the db entry with the highest id. Read as text: an
 * identifier is a 64-bit number, past what a JSON number holds exactly.
 */
export function stanzaSystemIdOfInfo(text: string, stanza: string): string | undefined {
  let stanzas: unknown;
  try {
    stanzas = JSON.parse(text.replace(/"system-id":(\d{1,20})/g, '"system-id":"$1"'));
  } catch {
    return undefined;
  }
  if (!Array.isArray(stanzas)) return undefined;
  const mine = stanzas.find((s: { name?: unknown }) => s?.name === stanza) as
    { db?: unknown } | undefined;
  let best: { id: number; systemId: string } | undefined;
  for (const db of Array.isArray(mine?.db) ? (mine.db as Record<string, unknown>[]) : []) {
    const id = db['id'];
    const systemId = db['system-id'];
    if (!Number.isSafeInteger(id) || typeof systemId !== 'string') continue;
    if (!best || (id as number) > best.id) best = { id: id as number, systemId };
  }
  return best?.systemId;
}
