// Making a node a standby of its service's primary, without stopping the
// primary:
// - a new standby is a base backup of the running primary (pg_basebackup,
//   streamed over a replication connection with TLS, through the standby's
//   own slot), run as the service's OS user, into a directory beside its
//   final place, renamed once complete (a crash leaves a stray directory,
//   never half a node);
// - a former primary (a failover promoted another node), or a standby that
//   cannot follow the new primary (follow.ts), is rewound onto the new
//   primary's timeline with pg_rewind (data checksums are on in the
//   template, which pg_rewind needs), or rebuilt from a base backup when it
//   cannot be.
// Either way the node gets standby.signal, and its configuration
// (conf.ts, NodeSettings.standby) names where it streams from.
// https://www.postgresql.org/docs/15/app-pgbasebackup.html
// https://www.postgresql.org/docs/15/app-pgrewind.html

import { lstat, readFile, rename } from 'node:fs/promises';
import { join } from 'node:path';
import { nodeName } from '../../../domain/service-nodes.js';
import { DriverError, type ServiceSpec, type SpecNode } from '../../driver.js';
import { withAdmin } from '../node/admin.js';
import { tenantCommand } from '../host/confine.js';
import { CommandError, type Prelude, run } from '../host/exec.js';
import type { NodeRef } from '../layout.js';
import { ensureOwnedDir, mkdirIn, removeTrees, writeOwned } from '../node/node-files.js';
import { type NodeState, readNodeState, writeNodeState } from '../node/node-state.js';
import type { OsUser } from '../host/os-user.js';
import { REPLICATION_CA, standbyConninfo } from './replication.js';
import { helperPrelude } from '../host/cgroups/node-cgroups.js';
import type { DriverContext } from '../context.js';
import type { NodeReplication } from './replication.js';

/** What this part needs of the driver (context.ts). */
type Ctx = Pick<DriverContext, 'cgroups' | 'layout' | 'log' | 'oom' | 'pg'>;

/**
 * A new standby `node` of the service, copied from its running primary.
 * Throws a retryable DriverError when the copy fails (the primary not
 * ready yet, its slot not made yet): the next apply tries again.
 */
export async function buildStandby(
  ctx: Ctx,
  spec: ServiceSpec,
  node: SpecNode,
  replication: NodeReplication,
  user: OsUser,
): Promise<void> {
  const { layout } = ctx;
  const ref = { id: spec.serviceId, node: node.index };
  const nodeDir = layout.nodeDir(ref);
  await mkdirIn(layout.instanceDir(spec.serviceId), 0o711);
  await mkdirIn(nodeDir, 0o711);
  // What an interrupted copy left.
  const staging = join(nodeDir, '.basebackup');
  await removeTrees([staging]);
  // Root's (the service's user only crosses it), so that the service's user
  // cannot swap `pgdata` for a link while Basin finishes it below.
  await mkdirIn(staging, 0o711);
  const target = join(staging, 'pgdata');
  await ensureOwnedDir(target, user);
  try {
    await ownedCopy(layout.caCert, join(staging, REPLICATION_CA), user);
    const pass = join(staging, 'pgpass');
    await writeOwned(pass, `*:*:*:*:${replication.secret}\n`, user);
    const name = (replication.nameOf ?? nodeName)(node.index);
    const conninfo = standbyConninfo({
      primaryPort: replication.primary.port,
      secret: '',
      name,
      pgdata: staging,
      via: replication.via,
      host: replication.remote?.host,
    }).replace(/password='' ?/, '');
    const basebackup = tenantCommand(
      user,
      join(ctx.pg.bin, 'pg_basebackup'),
      [
        '-D',
        target,
        '-d',
        `${conninfo} passfile='${pass}'`,
        '-X',
        'stream',
        // Its own slot, made on the primary beforehand; none across hosts
        // of an HA service (pg_basebackup then uses a temporary one).
        ...(replication.remote?.noSlot ? [] : ['-S', name]),
        '-c',
        'fast',
        '--no-password',
      ],
      { diesWithBasin: true },
    );
    const prelude = await helperPrelude(ctx, spec.serviceId);
    await run(basebackup.file, basebackup.args, { timeoutMs: 3_600_000, prelude });
    await finishStandbyData(ctx, target, user);
    await removeTrees([layout.pgdata(ref)]);
    await rename(target, layout.pgdata(ref));
  } catch (err) {
    throw new DriverError(
      `Could not copy the primary for standby ${nodeName(node.index)}: ${(err as Error).message}`,
      true,
    );
  } finally {
    await removeTrees([staging]);
  }
  ctx.log.info({ serviceId: spec.serviceId, node: node.index }, 'built a standby');
}

/**
 * A stopped node whose files are not on its primary's timeline (a former
 * primary, or a standby that went past the point where a failover's new
 * primary forked off: follow.ts), rewound onto that timeline with
 * pg_rewind; when pg_rewind cannot do it, its data is removed, and the
 * next apply builds it again from a base backup. While pg_rewind changes
 * the files the node's state says so (`rewind: 'running'`): found so by a
 * later call, they are half rewound and are removed (dropInterruptedRewind).
 * Returns whether it was rewound (false: removed, to be rebuilt).
 */
export async function rewindToStandby(
  ctx: Ctx,
  spec: ServiceSpec,
  node: SpecNode,
  replication: NodeReplication,
  user: OsUser,
  state: NodeState,
  save: () => Promise<void>,
): Promise<boolean> {
  const { layout } = ctx;
  const ref = { id: spec.serviceId, node: node.index };
  const pgdata = layout.pgdata(ref);
  const staging = join(layout.nodeDir(ref), '.rewind');
  // Nothing of the node is touched until pg_rewind runs: a primary that
  // does not answer yet is a retry, not a rebuild.
  let source: string;
  let prelude: Prelude;
  try {
    // Its cgroups first: a failure to make them is a retry, not a failed rewind.
    prelude = await helperPrelude(ctx, spec.serviceId);
    // A just promoted primary writes its new timeline into pg_control at
    // its next checkpoint: until then pg_rewind would see both on the same
    // timeline and rewind nothing.
    await withAdmin(replication.primaryAdmin, 'postgres', (c) => c.query('CHECKPOINT'));
    source = await rewindSource(ctx, node, replication, user, staging);
  } catch (err) {
    await removeTrees([staging]);
    throw new DriverError(
      `Could not prepare the rewind of ${nodeName(node.index)}: ${(err as Error).message}`,
      true,
    );
  }
  state.rewind = 'running';
  delete state.follows;
  await save();
  let rewound = false;
  try {
    const rewind = tenantCommand(
      user,
      join(ctx.pg.bin, 'pg_rewind'),
      ['--target-pgdata', pgdata, '--source-server', source, '--no-sync'],
      { diesWithBasin: true },
    );
    await run(rewind.file, rewind.args, { timeoutMs: 3_600_000, prelude });
    await finishStandbyData(ctx, pgdata, user);
    rewound = true;
    ctx.log.info({ serviceId: spec.serviceId, node: node.index }, 'rewound onto the primary');
  } catch (err) {
    const why = err instanceof CommandError ? err.message : String(err);
    ctx.log.warn(
      { serviceId: spec.serviceId, node: node.index, err: why },
      'pg_rewind failed; the node is rebuilt from a base backup',
    );
    await removeTrees([pgdata]);
  } finally {
    await removeTrees([staging]);
  }
  delete state.rewind;
  await save();
  return rewound;
}

/**
 * Where pg_rewind reads the primary's files from. A node of the service
 * itself runs as the service's OS user, which the primary's socket admits
 * as its superuser (pg_ident): Basin's administrative door. A read replica
 * runs as an OS user of its own, which that door does not admit: it
 * connects as its service's replication role, over loopback TCP to the
 * primary node, with TLS verified and its password in a passfile, as
 * pg_basebackup does; the role may call what pg_rewind needs
 * (replication.ts, ensureSlots).
 */
async function rewindSource(
  ctx: Ctx,
  node: SpecNode,
  replication: NodeReplication,
  user: OsUser,
  staging: string,
): Promise<string> {
  const primary = replication.primaryAdmin;
  if (!replication.separateUser) {
    return `host='${primary.socketDir}' port=${primary.port} user=postgres dbname=postgres`;
  }
  await removeTrees([staging]);
  await ensureOwnedDir(staging, user);
  await ownedCopy(ctx.layout.caCert, join(staging, REPLICATION_CA), user);
  const pass = join(staging, 'pgpass');
  await writeOwned(pass, `*:*:*:*:${replication.secret}\n`, user);
  // The primary node's own port, not the endpoint: HAProxy may not route
  // to a just promoted primary yet (replication.ts admits the role there).
  const conninfo = standbyConninfo({
    primaryPort: primary.port,
    secret: '',
    name: (replication.nameOf ?? nodeName)(node.index),
    pgdata: staging,
    via: replication.via,
  }).replace(/password='' ?/, '');
  return `${conninfo} dbname=postgres passfile='${pass}'`;
}

/**
 * A rewind that a previous Basin started and did not finish (it died while
 * pg_rewind ran): the node's files are half rewound and are removed, so
 * that the next apply rebuilds the node from a base backup.
 */
export async function dropInterruptedRewind(ctx: Ctx, ref: NodeRef): Promise<boolean> {
  const stateFile = ctx.layout.stateFile(ref);
  const state = await readNodeState(stateFile);
  if (state.rewind !== 'running') return false;
  await removeTrees([ctx.layout.pgdata(ref), join(ctx.layout.nodeDir(ref), '.rewind')]);
  delete state.rewind;
  delete state.follows;
  await writeNodeState(stateFile, state);
  ctx.log.warn(
    { serviceId: ref.id, node: ref.node },
    'a rewind was interrupted; the node is rebuilt from a base backup',
  );
  return true;
}

/**
 * What turns a copy of a primary into a standby's data directory: the
 * signal, the CA its conninfo trusts, and none of the primary's logs or
 * run files. The log directory goes whole (the server makes it again when
 * it starts): what is in it is the service's user's to swap for a link, so
 * Basin never lists it and removes what it named (rm does not follow the
 * link it removes; the data directory itself lies in a directory of root's).
 */
async function finishStandbyData(ctx: Ctx, pgdata: string, user: OsUser): Promise<void> {
  // A copy of a node under Patroni (a read replica set of an HA service
  // across hosts) has Patroni's postgresql.conf, whose parameters (the
  // leader's addresses, ports, certificate paths) would win over
  // basin.conf: the template's own, which Patroni kept as
  // postgresql.base.conf, takes its place, and Patroni's state goes.
  // rename does not follow a link the user may have put there: the file
  // is the user's to read in any case.
  if (await lstat(join(pgdata, 'postgresql.base.conf')).catch(() => null)) {
    await rename(join(pgdata, 'postgresql.base.conf'), join(pgdata, 'postgresql.conf'));
    await removeTrees(
      ['patroni.dynamic.json', 'postgresql.conf.backup', 'pg_hba.conf.backup', 'pg_ident.conf.backup'].map((n) => join(pgdata, n)), // prettier-ignore
    );
  }
  await writeOwned(join(pgdata, 'standby.signal'), '', user);
  await ownedCopy(ctx.layout.caCert, join(pgdata, REPLICATION_CA), user);
  await removeTrees(['log', 'postmaster.opts', 'postmaster.pid'].map((name) => join(pgdata, name)));
}

/**
 * A copy of root's file into a directory of the user's, the user's, 0600:
 * written as the user would (writeOwned), never through a link they put there.
 */
async function ownedCopy(from: string, to: string, user: OsUser): Promise<void> {
  await writeOwned(to, await readFile(from, 'utf8'), user);
}
