// A fork's data, made before its first start (docs/architecture.md §9; the security
// reasoning is in docs/security.md, Forks). In the background (tasks.ts),
// from nothing every time (an interrupted attempt leaves only staging
// directories, removed by the next):
//
//   NOW            a running parent: a low-level backup, copied through
//                  descriptors, reflinked where the file system can
//                  (now-copy.ts, safe-copy.ts); a stopped one: a copy of
//                  its data directory.
//   LAST_SNAPSHOT  a pgBackRest restore of the chosen backup, recovered just
//                  to consistency;
//   PITR           the same, recovered to the target time; from a stopped
//                  parent to a moment after it was stopped: a copy of its
//                  data directory (nothing happened since).
//
// Root copies what the fork needs from the parent (its data directory, or
// the chosen backup and the WAL since from its repository) into a directory
// only root can enter, never through a link and only files of the parent's
// OS user, without modes or ACLs of the parent's tenant (safe-copy.ts), and
// hands the copy to the fork's user; the restore and the recovery run as
// the fork's user, confined, reading that copy, which is removed before
// anybody but Basin can log in. So the fork's tenant never reads the
// parent's repository, the parent's tenant never writes into the fork, and
// pgBackRest never runs as root on a repository a tenant could have
// forged. Before it is published, the data is checked against what Basin
// recorded of the parent and given the fork's own system identifier
// (fork-check.ts). It is then published (renamed into the node's place)
// with the fork's recovery settings recorded in its state.json and its
// identifier beside its nodes; service-node.ts and fork-open.ts take it
// from there.

import { randomBytes } from 'node:crypto';
import { readdir, readFile, rename, rmdir } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { DriverError, type ServiceSpec } from '../../driver.js';
import { checkAndIdentify } from './fork-check.js';
import { fromRepositoryHost } from './fork-remote.js';
import {
  admitToParentRepository,
  type Copied,
  copyRepoSubset,
  parentOwner,
  restoreAsFork,
} from './fork-repo.js';
import {
  chownTree,
  ensureOwnedDir,
  mkdirIn,
  isStandbyData,
  nodeExists,
  removeTrees,
} from '../node/node-files.js';
import { readNodeState, type Recovery, writeNodeState } from '../node/node-state.js';
import { copyRunningCluster, keepTablespaceLink, NOT_COPIED, REMADE_DIRS } from './now-copy.js';
import { isRoot, type OsUser } from '../host/os-user.js';
import { postmasterPort, postmasterStatus } from '../node/postmaster.js';
import { clusterProcesses } from '../host/processes.js';
import { copyEntries } from '../host/files/safe-copy.js';
import { existsBeneath, withSafeDir } from '../host/files/safe-dir.js';
import { UnsafeFileError, writeFileAs } from '../host/files/safe-fs.js';
import { newSystemId, recordedSystemId, recordSystemId } from '../node/system-id.js';
import { archived, markWal } from '../node/wal-mark.js';
import { certHosts, issueServerCert } from '../node/tls.js';
import type { Layout, NodeRef } from '../layout.js';
import type { DriverContext } from '../context.js';

/** What this part needs of the driver (context.ts). */
type Ctx = Pick<
  DriverContext,
  | 'adminBounds'
  | 'backups'
  | 'cgroups'
  | 'layout'
  | 'locks'
  | 'log'
  | 'networks'
  | 'oom'
  | 'pg'
  | 'privateTmp'
  | 'publicHost'
  | 'remoteIdentity'
  | 'repositories'
  | 'users'
>;

type ForkSource = Extract<ServiceSpec['source'], { kind: 'fork' }>;

/**
 * Restores a fork's data into its node's place (see the top of this file);
 * or a moved service's own (ServiceSpec.relocated), from its own stanza,
 * the same way but keeping its system identifier.
 */
export async function restoreFork(
  ctx: Ctx,
  spec: ServiceSpec,
  userMade: Promise<OsUser>,
  signal: AbortSignal,
): Promise<void> {
  // Its repository server's side (another OS user, an identity, a process)
  // needs nothing of the fork's own user: started while that user is made
  // (each a useradd, 0.5-3 s apiece on a busy host), not after it; the
  // restore's ensureConfig joins it (one change of a repository at a time).
  // Both settle before the task ends: nothing of it outlives the task.
  const server = ctx.backups.ensureServer(spec);
  const restored = userMade.then((user) => restoreForUser(ctx, spec, user, signal));
  const [done, serverMade] = await Promise.allSettled([restored, server]);
  if (done.status === 'rejected') throw done.reason;
  if (serverMade.status === 'rejected') throw serverMade.reason;
}

async function restoreForUser(
  ctx: Ctx,
  spec: ServiceSpec,
  user: OsUser,
  signal: AbortSignal,
): Promise<void> {
  const source = spec.source as ForkSource;
  const { layout } = ctx;
  const relocated = spec.relocated;
  const parent = relocated ? spec.serviceId : source.parentServiceId;
  const ref = { id: spec.serviceId, node: 0 };
  // Each step's end, for whoever profiles a fork (--log-level debug).
  const began = performance.now();
  const lap = (step: string) =>
    ctx.log.debug(
      { serviceId: spec.serviceId, step, ms: Math.round(performance.now() - began) },
      'fork step',
    );
  await startOver(ctx, spec.serviceId, user, signal);
  lap('started over');
  await mkdirIn(layout.instanceDir(spec.serviceId), 0o711);
  const staging = join(layout.instanceDir(spec.serviceId), `.restore-0-${tag()}`);
  await mkdirIn(staging, 0o711);
  const pgdata = join(staging, 'pgdata');
  // The fork's own backups' side (its directories; with repository servers
  // also its server's user, certificates and process, about half a second)
  // is made while the parent's data is copied, which needs none of it; a
  // restore needs it (those directories, its client certificate).
  const config = ctx.backups.ensureConfig(spec, user);
  // Its server certificate too (two openssl runs): made aside, moved into
  // the data once that is complete; configure finds it current (tls.ts).
  const tls = join(staging, 'tls');
  const certified = mkdirIn(tls, 0o700).then(() =>
    issueServerCert(layout, tls, certHosts(ctx.publicHost, spec.serviceId), user),
  );
  const from = relocated ?? source.fromRepository;
  // From the repository host (fork-remote.ts): nothing of the parent is
  // here to lock; the hosts driver made ready what is restored. Otherwise
  // the parent's lock: no start, stop, restart, backup expiry or delete of
  // the parent while its data or its repository is read.
  const copying = from
    ? config
        .then(() => fromRepositoryHost(ctx, spec, user, parent, from, !!relocated, signal))
        .then(async (c) => {
          await restoreAsFork(ctx, spec, user, c, pgdata, signal);
          return c;
        })
    : ctx.locks.run(parent, async () => {
        signal.throwIfAborted();
        lap("the parent's lock taken");
        const c = await copyFromParent(ctx, spec, user, source, pgdata, signal, lap);
        lap('copied');
        // Through the parent's server, the restore reads its repository: still
        // under its lock (no expiry meanwhile), as a copy would be.
        if (c.throughServer) {
          await config;
          await restoreAsFork(ctx, spec, user, c, pgdata, signal);
        }
        return c;
      });
  // Both settle before either's failure is reported: no step of this
  // attempt still runs when the next one starts over.
  void config.then(
    () => lap("its backups' side made"),
    () => undefined,
  );
  const [made, copiedOut, cert] = await Promise.allSettled([config, copying, certified]);
  if (copiedOut.status === 'rejected') throw copiedOut.reason;
  if (made.status === 'rejected') throw made.reason;
  if (cert.status === 'rejected') throw cert.reason;
  const copied = copiedOut.value;
  signal.throwIfAborted();
  const restored = copied.recovery.kind === 'repo';
  if (restored && !copied.throughServer) {
    await restoreAsFork(ctx, spec, user, copied, pgdata, signal);
  }
  // Checked against the parent, and given the fork's own identifier, while
  // nothing runs on it: a copy is still root's alone, a restore's files
  // are the fork's user's, which runs nothing yet (startOver). A moved
  // service keeps its own, its stanza's: its archive goes on there.
  const systemId = relocated ? ownSystemId(copied, parent) : newSystemId();
  const recovery = await checkAndIdentify(
    layout,
    {
      pgdata,
      owner: !isRoot() ? undefined : restored ? user.uid : 0,
      parent,
      parentSystemId: relocated
        ? systemId
        : from
          ? (from.parentSystemId ?? undefined)
          : await recordedSystemId(layout.systemIdFile(parent)),
      forkId: spec.serviceId,
      forkSystemId: systemId,
    },
    copied,
    user,
  );
  lap('checked and identified');
  if (!restored) await chownTree([pgdata], user);
  lap('handed to its user');
  await finishData(ctx, pgdata, user, copied);
  for (const f of ['server.crt', 'server.key']) await rename(join(tls, f), join(pgdata, f));
  await rmdir(tls);
  await writeNodeState(join(staging, 'state.json'), {
    extensions: [],
    fork: 'recovering',
    recovery,
  });
  signal.throwIfAborted();
  await recordSystemId(layout.systemIdFile(spec.serviceId), systemId);
  await rename(staging, layout.nodeDir(ref));
  lap('in place');
  if (relocated) {
    ctx.log.info(
      { serviceId: spec.serviceId, backup: copied.backupLabel },
      'restored the moved service from its own backups',
    );
    return;
  }
  ctx.log.info(
    {
      serviceId: spec.serviceId,
      parent,
      strategy: source.strategy,
      recovery: copied.recovery.kind,
    },
    'restored the fork',
  );
}

/**
 * A moved service's identifier: its stanza's, as pgBackRest lists it (the
 * control plane does not hold it, and its old host is gone). Only its own
 * stanza is read, with its own credentials: whatever its tenant could have
 * put there is its own data.
 */
function ownSystemId(copied: Copied, id: string): string {
  const found = copied.repo?.stanzaSystemId;
  if (!found) {
    throw new DriverError(`The stanza of ${id} names no system identifier to restore.`, false);
  }
  return found;
}

/** Kills what an earlier attempt left running as the fork's user, and removes its staging. */
async function startOver(ctx: Ctx, id: string, user: OsUser, signal: AbortSignal): Promise<void> {
  for (let i = 0; (await ctx.users.killAll(user)) > 0; i++) {
    if (i > 100) throw new DriverError("The fork's OS user keeps running processes.", true);
    await sleep(100, undefined, { signal });
  }
  const { layout } = ctx;
  const stale: string[] = [];
  for (const [dir, prefix] of [
    [layout.instanceDir(id), '.restore-'],
    [layout.backupDir(id), '.source-'],
  ] as const) {
    const names = await readdir(dir).catch(() => [] as string[]);
    stale.push(...names.filter((n) => n.startsWith(prefix)).map((n) => join(dir, n)));
  }
  const { repo, conf, pg } = layout.forkSource(id);
  await removeTrees([...stale, repo, conf, pg]);
}

/** Under the parent's lock: copies what the fork is made from, as its strategy and the parent's state say. */
async function copyFromParent(
  ctx: Ctx,
  spec: ServiceSpec,
  user: OsUser,
  source: ForkSource,
  pgdata: string,
  signal: AbortSignal,
  lap: (step: string) => void,
): Promise<Copied> {
  const { layout } = ctx;
  const parent = source.parentServiceId;
  // A parent with standbys: its primary's data (after a failover, not node 0's).
  const parentRef = await primaryDataOf(layout, parent);
  const parentPgdata = layout.pgdata(parentRef);
  const hasData = await nodeExists(layout, parentRef);
  const owner = await parentOwner(ctx, parent).catch(() => undefined);
  const repository =
    owner === undefined ? undefined : await ctx.backups.repositoryOf(parent, { uid: owner });
  const hasRepo =
    repository !== undefined &&
    (await existsBeneath(repository.dir, ['backup', parent, 'backup.info'], repository.owner).catch(
      () => false,
    ));
  if (!hasData && !hasRepo) {
    throw new DriverError(`Its parent ${parent} does not exist (any more).`, false);
  }
  const pm = hasData ? await postmasterStatus(parentPgdata) : ({ up: false } as const);
  if (pm.up && pm.state !== 'ready') {
    throw new DriverError(`Its parent ${parent} is starting or stopping; trying again.`, true);
  }
  const running = pm.up;
  if (!running && hasData && (await clusterProcesses(parentPgdata)).length > 0) {
    throw new DriverError(`Its parent ${parent} is still shutting down; trying again.`, true);
  }
  const admin = async () => ({
    socketDir: layout.socketDir(parentRef),
    port: (await postmasterPort(parentPgdata)) ?? 0,
    pgdata: parentPgdata,
    bounds: ctx.adminBounds,
  });
  const parentUid = () => {
    if (owner === undefined) throw new DriverError(`Its parent ${parent} has no OS user.`, false);
    return owner;
  };

  if (source.strategy === 'NOW') {
    if (running) {
      await mkdirIn(pgdata, 0o700);
      const from = { ...(await admin()), owner: parentUid() };
      const { backupLabel } = await copying(() =>
        copyRunningCluster(from, pgdata, spec.serviceId, signal, lap),
      );
      return { recovery: { kind: 'copy' }, backupLabel };
    }
    if (!hasData) throw new DriverError(`Its parent ${parent} has no data to copy.`, false);
    await copyStopped(parentPgdata, parentUid(), pgdata, signal);
    return { recovery: { kind: 'none' } };
  }

  const label = source.backupLabel;
  if (label === null) throw new DriverError('No backup was chosen for this fork.', false);
  let target: Extract<Recovery, { kind: 'repo' }>['target'] = 'immediate';
  if (source.strategy === 'PITR') {
    const time = source.targetTime as string;
    target = { time };
    if (running) {
      // Everything up to now into the archive, with a commit after the target.
      await archiveUpToNow(await admin(), signal);
    } else if (hasData) {
      const marked = (await readNodeState(layout.stateFile(parentRef))).walMarkedAt;
      // Stopped since before the target: the target's state is its data directory.
      if (marked !== undefined && Date.parse(time) >= marked) {
        await copyStopped(parentPgdata, parentUid(), pgdata, signal);
        return { recovery: { kind: 'none' } };
      }
    }
  }
  const recovery: Recovery = { kind: 'repo', stanza: parent, target };
  if (await ctx.backups.moveInFlight(parent)) {
    throw new DriverError(
      "The parent's backups are being moved into a repository of their own: the fork waits for it.",
      true,
    );
  }
  if (await ctx.backups.serverOf(parent)) {
    const repo = await admitToParentRepository(ctx, spec.serviceId, user, parent, label, target);
    return { recovery, backupLabel: label, repo, throughServer: true };
  }
  const repo = await copyRepoSubset(ctx, spec.serviceId, parent, label, target, signal);
  return { recovery, backupLabel: label, repo };
}

/** A stopped cluster's data directory, as it is (it needs no recovery, or a crash recovery). */
async function copyStopped(
  from: string,
  owner: number,
  to: string,
  signal: AbortSignal,
): Promise<void> {
  await mkdirIn(to, 0o700);
  await copying(() =>
    withSafeDir(from, owner, async (dir) => {
      const entries = (await dir.names()).filter((n) => !NOT_COPIED.has(n) || n === 'pg_wal');
      await copyEntries(dir, entries, to, { owner, signal, keepLink: keepTablespaceLink });
    }),
  );
  for (const dir of REMADE_DIRS) await mkdirIn(join(to, dir), 0o700);
}

/**
 * A copy of the parent's data directory: what it refused (a link, a file
 * of another uid…: its tenant's doing, which the next attempt would meet
 * again) fails the fork for good, naming it.
 */
async function copying<T>(copy: () => Promise<T>): Promise<T> {
  try {
    return await copy();
  } catch (err) {
    if (err instanceof UnsafeFileError) {
      throw new DriverError(`Could not copy the parent's data: ${err.message}`, false);
    }
    throw err;
  }
}

/** Commits and switches the parent's WAL, then waits until that segment is archived (a minute at most). */
export async function archiveUpToNow(
  target: Parameters<typeof markWal>[0],
  signal: AbortSignal,
): Promise<void> {
  const segment = await markWal(target);
  const deadline = Date.now() + 60_000;
  while (!(await archived(target, segment))) {
    if (Date.now() > deadline) {
      throw new DriverError(
        `The parent's WAL up to now was not archived within a minute (segment ${segment}).`,
        true,
      );
    }
    await sleep(100, undefined, { signal });
  }
}

/**
 * What every fork's data gets from Basin, as root, in a directory its user
 * owns but where nothing of its runs yet: the template's postgresql.conf
 * and an empty postgresql.auto.conf (the parent's tenant wrote the
 * parent's, and must not configure the fork; conf.ts writes the rest), no
 * TLS key or certificate of the parent's (the fork gets its own), no lock
 * or signal files, an empty log directory, and the recovery's own files.
 */
async function finishData(ctx: Ctx, pgdata: string, user: OsUser, copied: Copied): Promise<void> {
  const template = await readFile(join(ctx.layout.templatePgdata, 'postgresql.conf'), 'utf8');
  await removeTrees(
    [
      'server.key',
      'server.crt',
      'postmaster.pid',
      'postmaster.opts',
      'standby.signal',
      'recovery.signal',
      'backup_label.old',
      'current_logfiles',
      'log',
    ].map((n) => join(pgdata, n)),
  );
  await ensureOwnedDir(join(pgdata, 'log'), user);
  await writeFileAs(join(pgdata, 'postgresql.conf'), template, user, 0o600);
  await writeFileAs(
    join(pgdata, 'postgresql.auto.conf'),
    '# Do not edit this file manually!\n# It will be overwritten by the ALTER SYSTEM command.\n',
    user,
    0o600,
  );
  if (copied.recovery.kind === 'none') return;
  await writeFileAs(join(pgdata, 'recovery.signal'), '', user, 0o600);
  if (copied.recovery.kind === 'copy') {
    await writeFileAs(join(pgdata, 'backup_label'), copied.backupLabel ?? '', user, 0o600);
  }
}

const tag = () => randomBytes(4).toString('hex');

/**
 * The node of service `id` whose data is a primary's (no standby.signal),
 * the lowest such; node 0 when none is (no data, or only standbys).
 */
export async function primaryDataOf(layout: Layout, id: string): Promise<NodeRef> {
  let names: string[] = [];
  try {
    names = await readdir(layout.instanceDir(id));
  } catch {
    // no nodes
  }
  const indices = names
    .filter((n) => /^\d+$/.test(n))
    .map(Number)
    .sort((a, b) => a - b);
  for (const node of indices) {
    const ref = { id, node };
    if ((await nodeExists(layout, ref)) && !(await isStandbyData(layout.pgdata(ref)))) return ref;
  }
  return { id, node: 0 };
}
