// What a driver saw happen to a resource outside any operation (Driver's
// watchNotes: a node's processes killed at its memory bound), written into
// the resource's logs as a `basin: …` entry. A resource gone meanwhile
// gets nothing: its logs went with it.

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
    await tx.events.add({
      resourceKind: target.kind,
      resourceId: target.id,
      node: null,
      at: deps.clock(),
      severity: note.severity,
      message: note.message,
    });
    return true;
  });
}
