// A read replica set's replication slots on its service's primary
// (`rs_<set>_<node>`): what its delete drops, on one host
// (converge/replica-set.ts) and across hosts (converge/remote-replica.ts).

import type { AdminSession } from '../node/admin.js';

/**
 * Drops the set's slots that no node streams from; the number still
 * active (a node not stopped yet), none on a primary in recovery.
 */
export async function dropInactiveSetSlots(c: AdminSession, setId: string): Promise<number> {
  const { rows } = await c.query<{ slot_name: string; active: boolean }>(
    `SELECT slot_name, active FROM pg_replication_slots
      WHERE NOT pg_is_in_recovery() AND slot_name LIKE ${c.escapeLiteral(`rs\\_${setId}\\_%`)}`,
  );
  for (const r of rows.filter((x) => !x.active)) {
    await c.query(`SELECT pg_drop_replication_slot(${c.escapeLiteral(r.slot_name)})`);
  }
  return rows.filter((x) => x.active).length;
}
