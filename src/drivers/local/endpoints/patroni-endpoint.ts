// This host's endpoint of an HA service whose nodes run under Patroni
// across hosts (docs/decisions.md, "HA across hosts"): every database host
// runs one, whether it holds a node of the service or not, so that a client
// may use any host's address. The frontend (haproxy-patroni.ts) routes to
// the node whose REST API answers GET /primary with 200; its checks show a
// client certificate of this host's CA (`basin-haproxy`), made once and
// readable by HAProxy's user alone: not the host's identity key (which
// drives the control plane's listener), and no tenant's.

import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { type PatroniNodeMember, patroniNodeId, type ServiceSpec } from '../../driver.js';
import { admittedCidrs } from '../config/conf.js';
import type { DriverContext } from '../context.js';
import { mkdirIn, writeRootFile } from '../node/node-files.js';
import { certCovers, issueLeaf } from '../patroni/patroni-node.js';
import { type PatroniCheckTls, renderPatroniService } from './haproxy-patroni.js';

type Ctx = Pick<
  DriverContext,
  'haproxy' | 'layout' | 'listenAddresses' | 'networks' | 'publicCidrs' | 'publicHost'
>;

/** Routes `spec.port` on this host to the service's primary, wherever Patroni made it. */
export async function ensurePatroniEndpoint(
  ctx: Ctx,
  spec: ServiceSpec,
  members: readonly PatroniNodeMember[],
): Promise<void> {
  const text = renderPatroniService(
    spec.serviceId,
    spec.port,
    members.map((m) => ({ index: m.index, host: m.address, port: m.port, apiPort: m.apiPort })),
    ctx.listenAddresses,
    [...admittedCidrs(spec, ctx.publicCidrs), ...poolerSource(ctx, spec, members)],
    await checkTls(ctx),
  );
  await ctx.haproxy.ensurePatroniService(spec.serviceId, text);
}

/**
 * The address this host's pooler of the service (patroni-pooler.ts) comes
 * from, while the pooler is enabled: its node's namespace's (the node of
 * the members at this host's address), admitted besides the service's
 * access rules, which the pooler applies to its own clients. None on a
 * host without a node of the service, whose endpoint has no pooler behind.
 */
function poolerSource(
  ctx: Pick<Ctx, 'networks' | 'publicHost'>,
  spec: ServiceSpec,
  members: readonly PatroniNodeMember[],
): string[] {
  if (!spec.pooler.enabled) return [];
  const here = members.find((m) => m.address === ctx.publicHost);
  const net = here && ctx.networks.get(patroniNodeId(spec.serviceId, here.index));
  return net ? [`${net.address}/32`] : [];
}

/** The CA HAProxy verifies the REST APIs with, and its client certificate (one PEM with its key). */
async function checkTls(ctx: Pick<Ctx, 'haproxy' | 'layout'>): Promise<PatroniCheckTls> {
  const dir = join(ctx.haproxy.home, 'patroni-check');
  await mkdirIn(ctx.haproxy.home, 0o711);
  await mkdirIn(dir, 0o711);
  const reader = ctx.haproxy.osUser;
  const ca = join(dir, 'ca.crt');
  const crt = join(dir, 'client.pem');
  await writeRootFile(ca, await readFile(ctx.layout.caCert, 'utf8'), reader);
  const current = await readFile(crt, 'utf8').catch(() => '');
  if (!(await certCovers(crt, ctx.layout.caCert, [])) || !current.includes('PRIVATE KEY')) {
    const pair = await issueLeaf(ctx, 'basin-haproxy', [], 'client');
    await writeRootFile(crt, `${pair.cert.trim()}\n${pair.key.trim()}\n`, reader);
  }
  return { ca, crt };
}
