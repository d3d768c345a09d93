// A fork restored from its parent's stanza on the repository host
// (docs/decisions.md, "Several hosts": forks across hosts; docs/security.md,
// Backups on the repository host). The parent may run on another host, so
// nothing of it is read here: no data directory, no lock, no repository.
// The hosts driver says what to restore (ServiceSpec.source.fromRepository:
// the parent's repository server, the backup, the target, and the parent's
// system identifier as its own host recorded it), and this host
//   - makes a key and has the control plane sign it as a client of the
//     parent's stanza (CN basin-service-<parent>, repositories CA): signed
//     only for the host the fork is placed on, only while the fork is being
//     made, valid for a day; kept in the fork's `source/` directory (root's,
//     readable by the fork's group), which goes when the fork opens, before
//     anybody but Basin can log in (fork-open.ts);
//   - reads the backup's bounds and the stanza's identifier through the
//     parent's server (`pgbackrest info`, as the fork's user: the
//     repository is encrypted, and only pgBackRest reads it);
//   - and restores it through that server, as the fork's user, confined,
//     in the fork's namespace (fork-repo.ts restoreAsFork); its recovery
//     fetches the parent's WAL the same way (fork-source.conf).
// fork-check.ts then checks the restored data against the recorded
// identifier and gives it the fork's, as for any fork.

import { DriverError, type ForkFromRepository, type ServiceSpec } from '../../driver.js';
import { makeKeyAndRequest } from '../../../lib/x509.js';
import { parseInfoJson, stanzaSystemIdOfInfo } from '../../../agent/repository-host/info-json.js';
import { helperCommand } from '../host/confine.js';
import { failureOf, run, withPrelude } from '../host/exec.js';
import { helperPrelude } from '../host/cgroups/node-cgroups.js';
import { mkdirIn, writeRootFile } from '../node/node-files.js';
import type { OsUser } from '../host/os-user.js';
import { backupProcesses } from '../config/pgbackrest.js';
import { renderForkSourceConf } from './repository/repo-conf.js';
import type { Copied } from './fork-repo.js';
import type { RemoteContext } from './repository/remote.js';
import type { DriverContext } from '../context.js';
import { join } from 'node:path';

type Ctx = Pick<DriverContext, 'cgroups' | 'layout' | 'oom' | 'pg' | 'privateTmp'> &
  Pick<RemoteContext, 'remoteIdentity'>;

/**
 * The fork's way to its parent's stanza on the repository host (see the top
 * of this file), and the backup it restores as that stanza lists it.
 */
export async function fromRepositoryHost(
  ctx: Ctx,
  spec: ServiceSpec,
  user: OsUser,
  parent: string,
  from: ForkFromRepository,
  own: boolean,
  signal: AbortSignal,
): Promise<Copied> {
  const { layout } = ctx;
  const id = spec.serviceId;
  if (!ctx.remoteIdentity) {
    throw new DriverError('This Basin has no repository host to restore the fork from.', false);
  }
  const src = layout.forkSource(id);
  const dirs = layout.backupDirs(id);
  await mkdirIn(layout.backupDir(id), 0o711);
  await mkdirIn(src.repo, 0o711);
  const cert = join(src.repo, 'client.crt');
  const key = join(src.repo, 'client.key');
  const ca = join(src.repo, 'ca.crt');
  const made = await makeKeyAndRequest('fork');
  let signed;
  try {
    // A moved service reads its own stanza as its own client, signed for
    // the host it is now placed on; a fork, its parent's, signed for it
    // only while it is being made.
    signed = await ctx.remoteIdentity(id, own ? 'client' : 'fork', made.csr);
  } catch (err) {
    throw new DriverError(
      `${own ? 'Its own' : "The parent's"} stanza could not be opened to this host: ${(err as Error).message}`,
      true,
    );
  }
  await writeRootFile(ca, signed.ca, user);
  await writeRootFile(key, made.key, user);
  await writeRootFile(cert, signed.certificate, user);
  await writeRootFile(
    src.conf,
    renderForkSourceConf({
      dirs: { spool: dirs.spool, lock: dirs.lock, log: dirs.log },
      repo: { ...from.repository, cert, key, ca },
      processMax: backupProcesses(spec.size),
      stanza: parent,
      pgPath: src.pg,
    }),
    user,
  );
  signal.throwIfAborted();
  const info = await pgbackrest(ctx, id, user, [`--stanza=${parent}`, '--output=json', 'info'], {
    timeoutMs: 120_000,
    signal,
  });
  const backups = parseInfoJson(info, parent);
  const backup =
    from.backupLabel === null ? backups.at(-1) : backups.find((b) => b.label === from.backupLabel);
  if (!backup) {
    throw new DriverError(
      own
        ? `${parent} has no backup on the repository host yet: it cannot be restored on another host.`
        : from.backupLabel === null
          ? `Its parent ${parent} has no backup to restore.`
          : `The backup ${from.backupLabel} of ${parent} no longer exists.`,
      false,
    );
  }
  const target = from.target;
  if (typeof target === 'object' && Date.parse(target.time) < Date.parse(backup.stoppedAt)) {
    throw new DriverError(
      `${target.time} is before the backup ${backup.label} of ${parent} ended (${backup.stoppedAt}).`,
      false,
    );
  }
  return {
    recovery: { kind: 'repo', stanza: parent, target },
    backupLabel: backup.label,
    repo: { backup, stanzaSystemId: stanzaSystemIdOfInfo(info, parent) },
    throughServer: true,
    sourceConfWritten: true,
  };
}

/** pgBackRest as the fork's user, confined and bounded as its restore is, with the fork's source configuration. */
async function pgbackrest(
  ctx: Ctx,
  id: string,
  user: OsUser,
  args: string[],
  o: { timeoutMs: number; signal: AbortSignal },
): Promise<string> {
  const cmd = helperCommand(
    user,
    ctx.pg.pgbackrest,
    [`--config=${ctx.layout.forkSource(id).conf}`, ...args],
    ctx.privateTmp,
  );
  const bounded = withPrelude(await helperPrelude(ctx, id), cmd);
  try {
    return await run(bounded.file, bounded.args, { timeoutMs: o.timeoutMs, signal: o.signal });
  } catch (err) {
    throw new DriverError(`Reading the parent's backups failed: ${failureOf(err)}`, true);
  }
}
