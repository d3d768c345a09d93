// The set-up the HA-service-with-a-read-replica-set cluster files share
// (replica-sets-ha-drain, ha-drain-endpoints): every host joined in a zone
// of its own, etcd's quorum, the installation's CA written for clients, an
// HA service of two nodes READY, and a set of two nodes active; then what
// those files ask of it (a host's state, the placement rows, the set as
// listed, a verify-full connection string).

import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { BasinProcess } from '../harness/basin-api.js';
import { type Cluster, until } from './cluster.js';

export interface PlacementRow {
  id: string;
  /** The host's number (`h<n>`). */
  host: number;
  /** The host it moves from, while it moves. */
  from: number | null;
}

export interface HaSetTopology {
  id: string;
  password: string;
  /** The service's port. */
  port: number;
  rsId: string;
  /** The set's port. */
  rsPort: number;
  /** A verify-full connection string to `port` at host i's address. */
  conn(i: number, port: number): string;
  /** Host i's state as `basin host list` says it. */
  stateOf(i: number): Promise<string | undefined>;
  /** The set as the API lists it, through `b` (a restarted control plane's too). */
  listed(b: BasinProcess): Promise<{ id: string; status: string; endpoint: { port: number } } | undefined>; // prettier-ignore
  /** The placement rows of a resource (a service's, a set's nodes), by resource id. */
  rows(resourceId: string): Promise<PlacementRow[]>;
}

export async function haServiceWithSet(
  c: Cluster,
  hosts: readonly number[],
  step: (what: string) => void,
): Promise<HaSetTopology> {
  const { b, cli, address } = c;
  for (const i of hosts) await c.joinAgent(i, { zone: `z${i}`, heartbeatMs: 500 });
  await until(async () => {
    const e = JSON.parse(await cli('host', 'etcd', '--json')) as {
      quorum: boolean;
      members: { healthy: boolean }[];
    };
    return e.quorum && e.members.length === 3 && e.members.every((m) => m.healthy);
  }, 300_000);
  step('etcd has its quorum');
  const ca = join(c.inst.dataDir, 'services-ca.crt');
  writeFileSync(ca, await cli('host', 'ca'));

  const created = await b.call('POST', b.servicePath(), { name: 'ha', replica_count: 1 });
  assert.equal(created.status, 202, created.text);
  const id = created.body.service_id as string;
  const svc = await b.waitForStatus(id, 'READY', 600_000);
  step('the service READY');
  const made = await b.call('POST', `${b.servicePath(id)}/replicaSets`, {
    name: 'readers',
    nodes: 2,
    cpu_millis: 500,
    memory_gbs: 2,
  });
  assert.equal(made.status, 202, made.text);
  const rsId = made.body.id as string;
  const listed = async (api: BasinProcess) => {
    const res = await api.call('GET', `${api.servicePath(id)}/replicaSets`);
    assert.equal(res.status, 200, res.text);
    return (res.body as { id: string; status: string; endpoint: { port: number } }[]).find(
      (r) => r.id === rsId,
    );
  };
  await b.waitFor(async () => (await listed(b))?.status === 'active', 'the set active', 300_000);
  const rsPort = (await listed(b))?.endpoint.port as number;
  step('the set active');

  const hostIds = new Map(
    ((await c.store.sql('SELECT id, name FROM hosts', [], 'basin')).rows as { id: string; name: string }[]) // prettier-ignore
      .map((h) => [h.id, Number(h.name.slice(1))] as const),
  );
  return {
    id,
    password: created.body.initial_password as string,
    port: svc.endpoint.port as number,
    rsId,
    rsPort,
    conn: (i, port) =>
      `host=${address(i)} port=${port} user=tsdbadmin dbname=tsdb sslmode=verify-full sslrootcert=${ca} connect_timeout=10`,
    stateOf: async (i) =>
      (JSON.parse(await cli('host', 'list', '--json')) as { name: string; state: string }[]).find(
        (h) => h.name === `h${i}`,
      )?.state,
    listed,
    rows: async (like) =>
      (
        (
          await c.store.sql(
            'SELECT resource_id, host_id, moved_from FROM placements WHERE resource_id LIKE $1 OR resource_id = $2 ORDER BY resource_id',
            [`${like}:%`, like],
            'basin',
          )
        ).rows as { resource_id: string; host_id: string; moved_from: string | null }[]
      ).map((r) => ({
        id: r.resource_id,
        host: hostIds.get(r.host_id) as number,
        from: r.moved_from === null ? null : (hostIds.get(r.moved_from) as number),
      })),
  };
}
