// Reading an operation row, for both stores: the row's columns are the same
// (sqlite/migrations.ts, postgres/migrations.ts), and so is what an
// unreadable row means (OperationRepo).

import { parseOperation } from '../domain/operations.js';
import type { Operation, OperationState } from './store.js';

/** A row as an Operation, once domain/operations.ts has checked its kind and payload. */
export function readOperation(row: unknown): { op: Operation } | { id: number; error: string } {
  const r = row as Record<string, unknown>;
  const id = r.id as number;
  let payload: unknown;
  try {
    payload = JSON.parse(r.payload as string);
  } catch {
    return { id, error: 'unreadable operation: its payload is not JSON' };
  }
  const parsed = parseOperation({
    kind: r.kind as string,
    resourceKind: r.resource_kind as string,
    resourceId: r.resource_id as string,
    projectId: r.project_id as string,
    payload,
  });
  if (!parsed.ok) return { id, error: parsed.error };
  return {
    op: {
      ...parsed.op,
      id,
      state: r.state as OperationState,
      attempts: r.attempts as number,
      waits: (r.waits as number | undefined) ?? 0,
      waitingSince: (r.waiting_since as number | null | undefined) ?? null,
      lastError: (r.last_error as string | null) ?? null,
      runAfter: r.run_after as number,
      lockedBy: (r.locked_by as string | null) ?? null,
      leaseExpiresAt: (r.lease_expires_at as number | null) ?? null,
      createdAt: r.created_at as string,
      updatedAt: r.updated_at as string,
    },
  };
}
