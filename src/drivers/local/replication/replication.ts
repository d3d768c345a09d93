// Streaming replication between the nodes of one service
// (https://www.postgresql.org/docs/15/warm-standby.html#STREAMING-REPLICATION):
// every standby streams from the service's primary over TCP on loopback,
// with TLS verified against the installation's CA, as the service's own
// replication role `basin_replication`, through a physical replication slot
// of its own (named after the node) so the primary keeps the WAL it still
// needs. `synchronous_standby_names = 'ANY k (…)'` makes commits wait for k
// of them (quorum commit).
//
// The role's password is the service's, random, kept by root beside the
// service's nodes (instances/<id>/replication.secret, 0600): it reaches
// only the service's own files (its standbys' primary_conninfo), which its
// OS user can read anyway; it never reaches a log or another service.

import { randomBytes } from 'node:crypto';
import { readFile, writeFile, rename, chmod } from 'node:fs/promises';
import { join } from 'node:path';
import { nodeName } from '../../../domain/service-nodes.js';
import { scramVerifier } from '../../../lib/secrets.js';
import { type AdminSession, type AdminTarget, withAdmin } from '../node/admin.js';
import { REPLICATION_ROLE } from '../config/conf.js';
import type { Layout } from '../layout.js';
import { mkdirIn } from '../node/node-files.js';
import type { SpecNode } from '../../driver.js';
import type { Settings } from '../config/conf.js';

/** The replication role's password of service `id`, made at first need. */
export async function replicationSecret(layout: Layout, id: string): Promise<string> {
  const file = join(layout.instanceDir(id), 'replication.secret');
  try {
    const text = (await readFile(file, 'utf8')).trim();
    if (/^[A-Za-z0-9]{32,}$/.test(text)) return text;
  } catch {
    // made below
  }
  const secret = randomBytes(24).toString('hex');
  await mkdirIn(layout.instanceDir(id), 0o711);
  const tmp = `${file}.tmp`;
  await writeFile(tmp, `${secret}\n`, { mode: 0o600 });
  await chmod(tmp, 0o600);
  await rename(tmp, file);
  return secret;
}

/** The file name, in a standby's data directory, of the CA its conninfo trusts. */
export const REPLICATION_CA = 'replication-ca.crt';

/**
 * A standby's primary_conninfo: loopback, TLS verified against the CA (the
 * server certificate covers 127.0.0.1), its node name as application_name,
 * which synchronous_standby_names refers to. A read replica set's node, in
 * a network namespace of its own, reaches its service through the host
 * instead (`via`: an address of the host, its gateway), where the
 * service's port leads to its namespace; the certificate is checked for
 * `localhost`, which it names too.
 */
export function standbyConninfo(o: {
  primaryPort: number;
  secret: string;
  /** Its application_name (and slot): `node<i>`, or a read replica's. */
  name: string;
  pgdata: string;
  via?: string | undefined;
  /**
   * A read replica set's node on another host than its primary's: the
   * primary's host address, which its certificate names (verify-full
   * checks it); `via` is then not used.
   */
  host?: string | undefined;
}): string {
  const words: [string, string][] = [
    ...(o.host !== undefined
      ? ([['host', o.host]] as [string, string][])
      : o.via === undefined
        ? ([['host', '127.0.0.1']] as [string, string][])
        : ([
            ['host', 'localhost'],
            ['hostaddr', o.via],
          ] as [string, string][])),
    ['port', String(o.primaryPort)],
    ['user', REPLICATION_ROLE],
    ['password', o.secret],
    ['application_name', o.name],
    ['sslmode', 'verify-full'],
    ['sslrootcert', join(o.pgdata, REPLICATION_CA)],
    ['connect_timeout', '2'],
  ];
  return words.map(([k, v]) => `${k}='${v.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`).join(' ');
}

/**
 * synchronous_standby_names for `sync` synchronous standbys among
 * `standbys` (indices): `ANY k (…)`, quorum commit; empty when none.
 */
export function synchronousStandbyNames(sync: number, standbys: readonly number[]): string {
  if (sync <= 0 || standbys.length === 0) return '';
  const k = Math.min(sync, standbys.length);
  return `ANY ${k} (${standbys.map((i) => `"${nodeName(i)}"`).join(', ')})`;
}

/**
 * On the primary: the replication role with the service's secret, and
 * exactly the physical slots of `standbys`. Slots of nodes that are gone
 * are dropped (an active one, whose standby still streams, at a later call).
 * Returns whether everything is in place.
 */
export async function ensureReplicationOnPrimary(
  target: AdminTarget,
  secret: string,
  standbys: readonly number[],
): Promise<boolean> {
  return withAdmin(target, 'postgres', async (c) => {
    await c.query(`SET log_statement = 'none'`);
    await c.query(`SET log_min_error_statement = 'panic'`);
    const role = await c.query(
      `SELECT 1 FROM pg_roles WHERE rolname = ${c.escapeLiteral(REPLICATION_ROLE)}`,
    );
    const verifier = c.escapeLiteral(scramVerifier(secret));
    const ident = c.escapeIdentifier(REPLICATION_ROLE);
    if (role.rowCount === 0) {
      await c.query(`CREATE ROLE ${ident} WITH REPLICATION LOGIN PASSWORD ${verifier}`);
    } else {
      // A tenant's CREATEROLE can change it: what the standbys use is put back.
      await c.query(`ALTER ROLE ${ident} WITH REPLICATION LOGIN PASSWORD ${verifier}`);
    }
    const wanted = new Set(standbys.map(nodeName));
    const { rows } = await c.query<{ slot_name: string; active: boolean }>(
      `SELECT slot_name, active FROM pg_replication_slots WHERE slot_type = 'physical'`,
    );
    let complete = true;
    for (const r of rows) {
      if (wanted.has(r.slot_name) || !/^node\d+$/.test(r.slot_name)) continue;
      if (r.active) {
        complete = false;
        continue;
      }
      await c.query(`SELECT pg_drop_replication_slot(${c.escapeLiteral(r.slot_name)})`);
    }
    const have = new Set(rows.map((r) => r.slot_name));
    for (const name of wanted) {
      if (!have.has(name)) {
        await c.query(`SELECT pg_create_physical_replication_slot(${c.escapeLiteral(name)}, true)`);
      }
    }
    return complete;
  });
}

/**
 * On the primary: the replication role with the service's secret (as
 * ensureReplicationOnPrimary), and exactly the slots `names` among those
 * named `prefix…` (a read replica set's); inactive others of the prefix
 * are dropped.
 */
export async function ensureSlots(
  target: AdminTarget,
  secret: string,
  names: readonly string[],
  prefix: string,
): Promise<void> {
  await withAdmin(target, 'postgres', async (c) => {
    await c.query(`SET log_statement = 'none'`);
    await c.query(`SET log_min_error_statement = 'panic'`);
    const ident = c.escapeIdentifier(REPLICATION_ROLE);
    const verifier = c.escapeLiteral(scramVerifier(secret));
    const role = await c.query(
      `SELECT 1 FROM pg_roles WHERE rolname = ${c.escapeLiteral(REPLICATION_ROLE)}`,
    );
    await c.query(
      role.rowCount === 0
        ? `CREATE ROLE ${ident} WITH REPLICATION LOGIN PASSWORD ${verifier}`
        : `ALTER ROLE ${ident} WITH REPLICATION LOGIN PASSWORD ${verifier}`,
    );
    const { rows } = await c.query<{ slot_name: string; active: boolean }>(
      `SELECT slot_name, active FROM pg_replication_slots WHERE slot_type = 'physical'`,
    );
    const wanted = new Set(names);
    for (const r of rows) {
      if (r.slot_name.startsWith(prefix) && !wanted.has(r.slot_name) && !r.active) {
        await c.query(`SELECT pg_drop_replication_slot(${c.escapeLiteral(r.slot_name)})`);
      }
    }
    const have = new Set(rows.map((r) => r.slot_name));
    for (const name of names) {
      if (!have.has(name)) {
        await c.query(`SELECT pg_create_physical_replication_slot(${c.escapeLiteral(name)}, true)`);
      }
    }
    await grantRewind(c, ident);
  });
}

/**
 * What pg_rewind calls on its source, for a read replica (which runs as
 * another OS user than the service's, so it cannot use Basin's door) to be
 * rewound as the replication role (standby.ts, rewindSource;
 * https://www.postgresql.org/docs/15/app-pgrewind.html). They read files of
 * the data directory only, which the role could already copy whole with a
 * base backup: it gains nothing it did not have.
 */
const REWIND_FUNCTIONS = [
  'pg_catalog.pg_ls_dir(text, boolean, boolean)',
  'pg_catalog.pg_stat_file(text, boolean)',
  'pg_catalog.pg_read_binary_file(text)',
  'pg_catalog.pg_read_binary_file(text, bigint, bigint, boolean)',
];

async function grantRewind(c: AdminSession, ident: string): Promise<void> {
  const { rows } = await c.query<{ ok: boolean }>(
    `SELECT bool_and(has_function_privilege(${c.escapeLiteral(REPLICATION_ROLE)}, f, 'EXECUTE')) AS ok
       FROM unnest(ARRAY[${REWIND_FUNCTIONS.map((f) => c.escapeLiteral(f)).join(', ')}]) AS f`,
  );
  if (rows[0]?.ok) return;
  await c.query(`GRANT EXECUTE ON FUNCTION ${REWIND_FUNCTIONS.join(', ')} TO ${ident}`);
}

/** What a node says of itself: its role, timeline and WAL position. */
export async function nodeStatus(target: AdminTarget): Promise<{
  standby: boolean;
  timeline: number | null;
  lsn: string | null;
  receivedLsn: string | null;
}> {
  return withAdmin(target, 'postgres', async (c) => {
    const { rows } = await c.query<{
      standby: boolean;
      timeline: number | null;
      lsn: string | null;
      received: string | null;
    }>(
      `SELECT pg_is_in_recovery() AS standby,
              CASE WHEN pg_is_in_recovery()
                THEN (SELECT received_tli FROM pg_stat_wal_receiver LIMIT 1)
                ELSE (SELECT timeline_id FROM pg_control_checkpoint()) END AS timeline,
              CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn()::text
                ELSE pg_current_wal_lsn()::text END AS lsn,
              pg_last_wal_receive_lsn()::text AS received`,
    );
    const r = rows[0];
    return {
      standby: r?.standby ?? false,
      timeline: r?.timeline === null || r?.timeline === undefined ? null : Number(r.timeline),
      lsn: r?.lsn ?? null,
      receivedLsn: r?.received ?? null,
    };
  });
}

/** The primary's view of its standbys: replay lag in bytes, and the sync state, by node name. */
export async function standbyLag(
  target: AdminTarget,
): Promise<Map<string, { lagBytes: number; syncState: string }>> {
  return withAdmin(target, 'postgres', async (c) => {
    const { rows } = await c.query<{ name: string; lag: string | null; sync_state: string }>(
      `SELECT application_name AS name,
              pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn)::bigint::text AS lag,
              sync_state
         FROM pg_stat_replication`,
    );
    return new Map(
      rows.map((r) => [r.name, { lagBytes: Number(r.lag ?? 0), syncState: r.sync_state }]),
    );
  });
}

/** Promotes a standby and waits (up to `waitSeconds`) until it accepts writes. */
export async function promote(target: AdminTarget, waitSeconds = 10): Promise<boolean> {
  return withAdmin(target, 'postgres', async (c) => {
    const { rows } = await c.query<{ ok: boolean }>(
      `SELECT CASE WHEN pg_is_in_recovery() THEN pg_promote(true, ${Math.floor(waitSeconds)}) ELSE true END AS ok`,
    );
    return rows[0]?.ok === true;
  });
}

/**
 * A node's part in replication, from the driver (local-driver.ts): a
 * standby streams from the primary's port with the service's secret; a
 * primary names its synchronous standbys.
 */
export interface NodeReplication {
  /** Where a standby streams from (a read replica set's node: the service's endpoint). */
  primary: SpecNode;
  /** Basin's administrative door to the primary node itself (follow.ts, standby.ts). */
  primaryAdmin: AdminTarget;
  /**
   * A read replica set's node: it runs as an OS user of its own, which the
   * primary's socket does not admit, so it is rewound as the replication
   * role over loopback TLS (standby.ts, rewindSource).
   */
  separateUser?: boolean;
  /**
   * Where such a node reaches its service from its own network namespace:
   * an address of the host (docs/decisions.md, Service networks);
   * undefined: loopback, in the service's own namespace or the host's.
   */
  via?: string | undefined;
  secret: string;
  synchronousStandbys: string;
  /** A standby's application_name and slot (default nodeName: `node<i>`). */
  nameOf?: (index: number) => string;
  /**
   * Settings a hot standby needs at least as high as its primary's
   * (max_connections…): a smaller read replica than its primary would not start.
   */
  floor?: Settings;
  /**
   * A read replica set's node on another host than its primary's
   * (remote-replica.ts): it streams from `host` (the primary's host
   * address); its certificate names `names` besides its own host's, and
   * its pg_hba admits HAProxy's connections from `proxies`. Its primary
   * has no administrative door here (`primaryAdmin` is not used): it is
   * never rewound, and its timeline is followed by
   * recovery_target_timeline=latest alone.
   */
  remote?: {
    host: string;
    names: readonly string[];
    proxies: readonly string[];
    /** Without a slot (an HA service's: Patroni owns its slots). */
    noSlot?: boolean;
  };
}
