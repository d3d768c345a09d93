// What a driver saw happen to a resource outside any operation (Driver's
// watchNotes: a node's processes killed at its memory bound), written into
// the resource's logs as a `basin: …` entry. A resource gone meanwhile
// gets nothing: its logs went with it. A note to be told once (`once`) is
// looked for in the same transaction, so that two readings of one fact (a
// Patroni log line read again, a leader change seen by two control-plane
// processes in turn) make one entry.

import type { Target } from '../domain/logs.js';
import type { ProgressNote } from '../domain/progress.js';
import type { HandlerDeps } from './handler-deps.js';

export async function recordNote(
  deps: Pick<HandlerDeps, 'store' | 'clock'>,
  target: Target,
  note: ProgressNote,
): Promise<boolean> {
  return deps.store.transaction(async (tx) => {
    const found =
      target.kind === 'service'
        ? await tx.services.get(target.id)
        : await tx.replicaSets.get(target.id);
    if (!found) return false;
    const at = note.at ?? deps.clock();
    if (note.once !== undefined && (await told(tx, target, note, at))) return false;
    await tx.events.add({
      resourceKind: target.kind,
      resourceId: target.id,
      node: null,
      at,
      severity: note.severity,
      message: note.message,
    });
    return true;
  });
}

/** Whether the resource's logs already hold `note` (as its `once` says). */
async function told(
  tx: Pick<HandlerDeps['store'], 'events'>,
  target: Target,
  note: ProgressNote,
  at: number,
): Promise<boolean> {
  const ever = note.once !== undefined && note.once !== 'at' ? note.once.ever : undefined;
  const found = await tx.events.list(target.kind, target.id, {
    node: 0,
    ...(ever ? {} : { since: at - 1, until: at + 1 }),
    severities: [],
    search: ever ?? [note.message],
    limit: 20,
  });
  return ever ? found.length > 0 : found.some((e) => e.message === note.message && e.at === at);
}
