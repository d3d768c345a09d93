// Benchmark `several-hosts` (issue 21): an installation of several hosts on
// this one machine (the cluster tests' namespace topology, bench-cluster.ts:
// h1 the repository host, h2-h4 database hosts, each a `basin host run`),
// with Basin as shipped on `--driver hosts` (`--restore-lost-services on`,
// otherwise its defaults). It measures, against what the same tools do by
// hand in the same run:
//
//   - archiving: a parent service writes BENCH_HOSTS_DATA_MB (1,024) of
//     rows in one statement; the time until its WAL is all archived on the
//     repository host, as WAL MB per second, against `pgbackrest
//     archive-push` by hand of those segments on the repository host into a
//     scratch repository (no network, no TLS: the tool's own floor);
//   - forks across hosts: a `NOW` fork of the parent (a fresh backup of the
//     parent, then a restore on another host), and a `LAST_SNAPSHOT` fork
//     of that fork once its own first backup is taken (the rows in it:
//     a restore of that backup), accept → READY, each against a restore
//     by hand of the same backup on the repository host (`pgbackrest
//     restore` of the stanza as its user, then PostgreSQL recovering to
//     the end of the archive until it accepts connections): no network,
//     no TLS, nothing but the restore;
//   - replication across hosts: an HA service (one standby, on another
//     host, under Patroni) under `pgbench` (TPC-B-like, 4 clients) through
//     its endpoint: the standby's replay lag sampled on the leader, and the
//     throughput against the same pgbench on the parent (no standby);
//   - a lost host: the `NOW` fork's host killed (every process, then its
//     link) while a client commits a timestamp every 100 ms: kill → the
//     service READY on another host with all its rows, against the restore
//     by hand of its own first backup; and the recovery point: how much
//     older the newest restored timestamp is than the last acknowledged.
//
// Target: once its host is noticed lost (the service UNSTABLE: the
// configured `--host-lost-after`, 15 s, plus the view's refresh and the
// reconciler's tick), the service READY elsewhere within 2x the restore by
// hand of the same backup. Kill → READY is reported whole.

import { execFile } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { chown, mkdir, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { type Cluster, joinWithRepositoryHost } from '../test/cluster/cluster.js';
import { psql } from '../test/e2e/clients.js';
import { pitrWindowStart } from '../test/harness/basin-api.js';
import { benchCluster } from './bench-cluster.js';
import type { BenchContext } from './bench-context.js';
import { envInt } from './env.js';
import { pgbench, type PgbenchRun } from './pgbench.js';
import { type BarePostgres, startBarePostgres } from './bare-postgres.js';
import { type BenchOutcome, fixed, heading, percentile, table, warn } from './report.js';

const PREFIX = 'bsh';
/** The topology's subnet, 10.231.41.0/24: no test file uses it. */
const NET = 41;
const run = promisify(execFile);

interface Svc {
  id: string;
  password: string;
  host: string;
  port: number;
}

export async function severalHosts(ctx: BenchContext): Promise<BenchOutcome> {
  const mb = envInt('BENCH_HOSTS_DATA_MB', 1024, 16);
  heading(
    `Several hosts: archiving, forks across hosts, replication, a lost host (${mb} MB) vs pgBackRest by hand`,
  );
  const { c, close } = await benchCluster({
    prefix: PREFIX,
    net: NET,
    hosts: 4,
    driver: 'hosts',
    args: ['--restore-lost-services', 'on'],
  });
  let failed = true;
  try {
    const outcome = await measure(c, ctx, mb);
    failed = false;
    return outcome;
  } finally {
    await close(failed);
  }
}

async function measure(c: Cluster, ctx: BenchContext, mb: number): Promise<BenchOutcome> {
  const b = c.b;
  await joinWithRepositoryHost(c, 4);
  const ca = join(ctx.tmpDir, 'services-ca.crt');
  writeFileSync(ca, await c.cli('host', 'ca'));
  const conn = (s: Svc, host = s.host) =>
    `host=${host} port=${s.port} user=tsdbadmin dbname=tsdb sslmode=verify-full sslrootcert=${ca} connect_timeout=10`;
  const sql = (s: Svc, q: string, host?: string) => psql(conn(s, host), s.password, q);
  const ready = async (id: string, password: string, ms = 900_000): Promise<Svc> => {
    const got = await b.waitForStatus(id, 'READY', ms);
    return { id, password, host: got.endpoint.host as string, port: got.endpoint.port as number };
  };
  const create = async (body: Record<string, unknown>) => {
    const r = await b.call('POST', b.servicePath(), body);
    if (r.status !== 202) throw new Error(`create: ${r.status} ${r.text}`);
    return { id: r.body.service_id as string, password: r.body.initial_password as string };
  };
  const hostName = (address: string) => `h${Number(address.split('.')[3]) - 10}`;
  const rows = Math.ceil((mb * 1024 * 1024) / 1100);

  // The parent, its rows, and their WAL archived on the repository host.
  const made = await create({ name: 'bench-parent' });
  const parent = await ready(made.id, made.password);
  await b.waitFor(() => pitrWindowStart(b, parent.id), 'its first backup', 300_000);
  const startLsn = await sql(parent, 'SELECT pg_current_wal_lsn()');
  const loadStart = performance.now();
  await sql(parent, `CREATE TABLE t AS SELECT g AS n, repeat('x', 1000) AS pad FROM generate_series(1, ${rows}) g`); // prettier-ignore
  const loadMs = performance.now() - loadStart;
  const walBytes = Number(
    await sql(parent, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '${startLsn}')`),
  );
  await archived(parent, sql);
  const archivedMs = performance.now() - loadStart;
  const segmentBytes = await sql(parent, "SELECT setting FROM pg_settings WHERE name = 'wal_segment_size'"); // prettier-ignore
  const walMb = walBytes / 1024 / 1024;
  console.log(
    `parent ${parent.id} on ${hostName(parent.host)}: ${rows} rows, ${fixed(walMb)} MB of WAL written in ` +
      `${fixed(loadMs)} ms, all archived ${fixed(archivedMs)} ms after the write began`,
  );

  // Forks across hosts, and the restores by hand of the backups they restore:
  // a NOW fork's, the parent's backup it takes; a LAST_SNAPSHOT fork's (of
  // the NOW fork, whose first backup holds the rows), that backup.
  const fork = async (from: Svc, strategy: string) => {
    const t0 = performance.now();
    const r = await b.call('POST', `${b.servicePath(from.id)}/forkService`, {
      fork_strategy: strategy,
      name: `bench-${strategy.toLowerCase()}`,
    });
    if (r.status !== 202) throw new Error(`fork ${strategy}: ${r.status} ${r.text}`);
    const s = await ready(r.body.service_id as string, r.body.initial_password as string);
    const ms = performance.now() - t0;
    const count = await sql(s, 'SELECT count(*) FROM t');
    if (count !== String(rows)) throw new Error(`the ${strategy} fork holds ${count} rows`);
    return { s, ms };
  };
  const now = await fork(parent, 'NOW');
  // The archive-push by hand needs a data directory of the parent's system: the one just restored.
  let push = { ms: NaN, mb: NaN };
  const parentByHand = await restoreByHand(c, parent.id, join(c.host(1).dataDir, 'bench-restore-parent'), async (pgdata) => {
    push = await archivePushByHand(c, parent.id, pgdata, Number(segmentBytes));
  }); // prettier-ignore
  await b.waitFor(() => pitrWindowStart(b, now.s.id), "the NOW fork's first backup", 600_000);
  const snapshot = await fork(now.s, 'LAST_SNAPSHOT');
  const forkByHand = await restoreByHand(
    c,
    now.s.id,
    join(c.host(1).dataDir, 'bench-restore-fork'),
  );
  console.log(
    `forks: NOW ${fixed(now.ms)} ms onto ${hostName(now.s.host)} (restore by hand of its backup ${fixed(parentByHand)} ms), ` +
      `LAST_SNAPSHOT of it ${fixed(snapshot.ms)} ms onto ${hostName(snapshot.s.host)} (by hand ${fixed(forkByHand)} ms); ` +
      `${fixed(push.mb)} MB of WAL pushed by hand in ${fixed(push.ms)} ms`,
  );
  await b.call('DELETE', b.servicePath(snapshot.s.id));

  // Replication across hosts under pgbench, against the parent alone.
  const haMade = await create({ name: 'bench-ha', replica_count: 1 });
  const ha = await ready(haMade.id, haMade.password);
  const repl = await replication(conn(ha), ha.password, conn(parent), parent.password);
  for (const id of [ha.id, parent.id]) await b.call('DELETE', b.servicePath(id));
  for (const id of [ha.id, parent.id, snapshot.s.id]) await b.waitGone(id, 300_000);

  // The NOW fork's host lost.
  // A writer commits a timestamp every 100 ms (its table archived first)
  // until the host dies: what the restored service holds of them is the
  // recovery point. A writer this light fills a WAL segment in minutes, so
  // archive_timeout (5 min) bounds it: it runs past one.
  await sql(now.s, 'CREATE TABLE beat (at timestamptz)');
  await archived(now.s, sql);
  const writer = heartbeat(conn(now.s), now.s.password);
  await sleep(envInt('BENCH_HOSTS_WRITE_S', 330, 1) * 1000);
  const lostIndex = Number(now.s.host.split('.')[3]) - 10;
  const killedAt = performance.now();
  c.killHost(lostIndex);
  const lastAcked = await writer.stop();
  let unstableMs = 0;
  const moved = await b.waitFor(
    async () => {
      const r = await b.call('GET', b.servicePath(now.s.id));
      if (unstableMs === 0 && r.body.status === 'UNSTABLE') unstableMs = performance.now() - killedAt; // prettier-ignore
      const there = r.body.endpoint?.host as string | undefined;
      return (r.body.status === 'READY' && there !== now.s.host && there) || undefined;
    },
    'the lost host service READY on another host',
    1_800_000,
  );
  const lostMs = performance.now() - killedAt;
  const count = await sql(now.s, 'SELECT count(*) FROM t', moved);
  if (count !== String(rows)) throw new Error(`restored elsewhere, it holds ${count} rows`);
  const kept = await sql(now.s, "SELECT coalesce(extract(epoch FROM max(at)) * 1000, 0)::bigint FROM beat", moved); // prettier-ignore
  // None kept: everything since the writer began is lost.
  const rpoMs = lastAcked - (Number(kept) || writer.startedAt);
  console.log(
    `recovery point: the last commit acknowledged before the kill is ${fixed(rpoMs)} ms newer than the newest one restored ` +
      `(a writer of 10 commits/s for ${fixed((lastAcked - writer.startedAt) / 1000)} s; archive_timeout, 5 min, bounds it)`,
  );
  console.log(
    `lost host ${hostName(now.s.host)}: UNSTABLE after ${fixed(unstableMs)} ms, READY on ${hostName(moved)} ` +
      `after ${fixed(lostMs)} ms with all ${rows} rows`,
  );

  console.log('');
  table(
    ['what', 'basin ms', 'by hand ms', 'ratio'],
    [
      ['archive, MB/s', (walMb / (archivedMs / 1000)).toFixed(1), (push.mb / (push.ms / 1000)).toFixed(1), ((push.mb / (push.ms / 1000)) / (walMb / (archivedMs / 1000))).toFixed(2)], // prettier-ignore
      ['NOW fork, another host', fixed(now.ms), fixed(parentByHand), (now.ms / parentByHand).toFixed(2)], // prettier-ignore
      ['LAST_SNAPSHOT fork, another host', fixed(snapshot.ms), fixed(forkByHand), (snapshot.ms / forkByHand).toFixed(2)], // prettier-ignore
      ['lost host: kill to READY elsewhere', fixed(lostMs), '', ''],
      ['  of it: noticed (UNSTABLE) to READY', fixed(lostMs - unstableMs), fixed(forkByHand), ((lostMs - unstableMs) / forkByHand).toFixed(2)], // prettier-ignore
    ],
  );
  console.log('');
  table(
    ['pgbench 4 clients', 'tps', 'replay lag p50 ms', 'p99 ms', 'max ms', 'max bytes behind'],
    [
      ['HA, standby on another host', fixed(repl.ha.tps), fixed(repl.lagP50), fixed(repl.lagP99), fixed(repl.lagMax), String(repl.bytesMax)], // prettier-ignore
      ['the parent, no standby', fixed(repl.alone.tps), '-', '-', '-', '-'],
    ],
  );
  const throughput = walMb / (archivedMs / 1000);
  const headline =
    `several-hosts (${mb} MB): archive ${throughput.toFixed(1)} MB/s (by hand ${(push.mb / (push.ms / 1000)).toFixed(1)}); ` +
    `NOW fork ${fixed(now.ms)} ms (by hand ${fixed(parentByHand)}), LAST_SNAPSHOT ${fixed(snapshot.ms)} ms (by hand ${fixed(forkByHand)}); ` +
    `host lost to READY elsewhere ${fixed(lostMs)} ms (noticed after ${fixed(unstableMs)}), recovery point ${fixed(rpoMs / 1000, 1)} s; ` +
    `replay lag p99 ${fixed(repl.lagP99)} ms, tps ${fixed(repl.ha.tps)} vs ${fixed(repl.alone.tps)} alone`;
  console.log(headline);
  const met = lostMs - unstableMs <= 2 * forkByHand;
  if (!met)
    warn('The lost host service took longer than 2x a restore by hand once its loss was noticed.');
  return { headline, metTarget: met };
}

/** Until the segment the last write is in is archived (filled first: a tenant cannot switch WAL). */
async function archived(s: Svc, sql: (s: Svc, q: string) => Promise<string>): Promise<void> {
  const segment = await sql(s, 'SELECT pg_walfile_name(pg_current_wal_lsn())');
  await sql(s, 'CREATE TABLE IF NOT EXISTS filler (x text); INSERT INTO filler SELECT repeat($$x$$, 1000) FROM generate_series(1, 20000)'); // prettier-ignore
  const deadline = Date.now() + 1_800_000;
  const last = "SELECT coalesce(last_archived_wal, '') FROM pg_stat_archiver";
  while ((await sql(s, last)) < segment) {
    if (Date.now() > deadline) throw new Error(`segment ${segment} was never archived`);
    await sleep(100);
  }
}

/** The repository host's files of a service's repository, and its OS user there. */
function repository(c: Cluster, id: string) {
  const dir = join(c.host(1).dataDir, 'repository', 'repos', id);
  const user = c.users(1).find((u) => u.name === `basin-r-${id}`);
  if (!user) throw new Error(`no repository user basin-r-${id} on the repository host`);
  return { dir, conf: join(dir, 'server.conf'), uid: user.uid, gid: user.gid };
}

/** The WAL segments of the stanza's archive (their file names, with the checksum suffix). */
async function repoSegments(c: Cluster, id: string): Promise<string[]> {
  const archive = join(repository(c, id).dir, 'repo', 'archive', id);
  const out: string[] = [];
  for (const v of await readdir(archive)) {
    if (!/^\d+-\d+$/.test(v)) continue;
    for (const d of await readdir(join(archive, v))) {
      if (!/^[0-9A-F]{16}$/.test(d)) continue;
      for (const f of await readdir(join(archive, v, d))) {
        if (/^[0-9A-F]{24}-/.test(f)) out.push(join(archive, v, d, f));
      }
    }
  }
  return out.sort();
}

/**
 * `pgbackrest archive-push` by hand on the repository host, as the
 * repository's user, of the segments the parent archived (read back with
 * archive-get first, untimed), into a scratch stanza of a scratch
 * repository with the same compression and encryption, one after another
 * as PostgreSQL's archiver hands them: pgBackRest's own floor, no network,
 * no TLS. `pgdata` is a data directory of the parent's system (its
 * pg_control), which pgBackRest checks each segment against.
 */
async function archivePushByHand(
  c: Cluster,
  id: string,
  pgdata: string,
  segmentBytes: number,
): Promise<{ ms: number; mb: number }> {
  const r = repository(c, id);
  const as = { uid: r.uid, gid: r.gid };
  const env = { PATH: '/usr/bin:/bin', LANG: 'C.UTF-8', LC_ALL: 'C.UTF-8' };
  const dir = join(pgdata, '..', 'push');
  const wal = join(dir, 'wal');
  for (const d of [dir, wal, join(dir, 'repo'), join(dir, 'tmp')]) {
    await mkdir(d, { recursive: true, mode: 0o700 });
    await chown(d, r.uid, r.gid);
  }
  try {
    const names = (await repoSegments(c, id)).map((s) => (s.split('/').at(-1) as string).slice(0, 24)); // prettier-ignore
    const stanza = ['--stanza', id, '--config', r.conf, `--pg1-path=${pgdata}`, '--log-level-stderr=error']; // prettier-ignore
    for (const n of names) {
      await run('pgbackrest', [...stanza, 'archive-get', n, join(wal, n)], {
        ...as,
        env,
        cwd: dir,
      });
    }
    // A configuration file: pgBackRest takes each option for the commands
    // it applies to (on a command line, an option another command would
    // not take is an error), and refuses a pass on a command line.
    const conf = join(dir, 'scratch.conf');
    writeFileSync(conf, ['[global]', `repo1-path=${join(dir, 'repo')}`, 'repo1-cipher-type=aes-256-cbc',
      'repo1-cipher-pass=bench-scratch-pass', 'compress-type=lz4', `lock-path=${join(dir, 'tmp')}`,
      `log-path=${join(dir, 'tmp')}`, 'log-level-stderr=error', '[scratch]', `pg1-path=${pgdata}`, ''].join('\n')); // prettier-ignore
    await chown(conf, r.uid, r.gid);
    const scratch = ['--config', conf, '--stanza', 'scratch'];
    await run('pgbackrest', [...scratch, '--no-online', 'stanza-create'], { ...as, env, cwd: dir });
    const t0 = performance.now();
    for (const n of names) {
      await run('pgbackrest', [...scratch, 'archive-push', join(wal, n)], { ...as, env, cwd: dir });
    }
    return { ms: performance.now() - t0, mb: (names.length * segmentBytes) / 1024 / 1024 };
  } catch (err) {
    const e = err as { stderr?: string; stdout?: string };
    throw new Error(
      `archive-push by hand failed: ${e.stderr ?? ''}${e.stdout ?? ''}${String(err)}`,
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * The restore by hand, timed: `pgbackrest restore` of the stanza's latest
 * backup on the repository host, as the repository's user, into an empty
 * directory, then PostgreSQL on it (no TCP listener, no TLS, no archiving)
 * recovering to the end of the archive until it accepts connections.
 * Stopped and removed, untimed; `after` runs on it first.
 */
async function restoreByHand(
  c: Cluster,
  id: string,
  dir: string,
  after?: (pgdata: string) => Promise<void>,
): Promise<number> {
  const r = repository(c, id);
  const pgdata = join(dir, 'pgdata');
  const sockets = join(dir, 's');
  for (const d of [dir, pgdata, sockets]) {
    await mkdir(d, { mode: 0o700 });
    await chown(d, r.uid, r.gid);
  }
  const as = { uid: r.uid, gid: r.gid };
  const env = { PATH: '/usr/bin:/bin', LANG: 'C.UTF-8', LC_ALL: 'C.UTF-8' };
  // The repository's configuration, with its WAL fetched ahead as Basin's
  // stanzas do (archive-async), into a spool of its own (pgBackRest's
  // default is root's).
  const conf = join(dir, 'restore.conf');
  writeFileSync(conf, readFileSync(r.conf, 'utf8').replace('[global]', `[global]\narchive-async=y\nspool-path=${dir}`)); // prettier-ignore
  await chown(conf, r.uid, r.gid);
  let pg: BarePostgres | undefined;
  try {
    await run('sync');
    const t0 = performance.now();
    await run(
      'pgbackrest',
      ['--config', conf, '--stanza', id, `--pg1-path=${pgdata}`, '--log-level-stderr=error', 'restore'], // prettier-ignore
      { ...as, env, cwd: dir },
    ).catch((err: { stderr?: string; stdout?: string }) => {
      throw new Error(`the restore by hand failed: ${err.stderr ?? ''}${err.stdout ?? ''}`);
    });
    pg = startBarePostgres({
      pgdata,
      sockets,
      ...as,
      settings: ['ssl=off', 'logging_collector=off'],
    });
    await pg.ready(900_000);
    const ms = performance.now() - t0;
    await after?.(pgdata);
    return ms;
  } finally {
    await pg?.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * A client committing `now()` every 100 ms, each in its own connection (a
 * host killed leaves no socket to wait on); `stop` gives the wall-clock
 * time (ms since the epoch) of the last commit acknowledged.
 */
function heartbeat(conn: string, password: string): { startedAt: number; stop(): Promise<number> } {
  const startedAt = Date.now();
  let stopped = false;
  let last = 0;
  const loop = (async () => {
    while (!stopped) {
      const out = await psql(conn, password, "INSERT INTO beat VALUES (now()) RETURNING (extract(epoch FROM at) * 1000)::bigint").catch(() => ''); // prettier-ignore
      if (out) last = Math.max(last, Number(out));
      await sleep(100);
    }
  })();
  return {
    startedAt,
    async stop() {
      stopped = true;
      await loop;
      return last;
    },
  };
}

/**
 * pgbench (TPC-B-like, 4 clients, 20 s) on the HA service through its
 * endpoint while its leader's view of the standby's replay lag is sampled
 * every 250 ms; then the same on the service without a standby.
 */
async function replication(
  ha: string,
  haPassword: string,
  alone: string,
  alonePassword: string,
): Promise<{
  ha: PgbenchRun;
  alone: PgbenchRun;
  lagP50: number;
  lagP99: number;
  lagMax: number;
  bytesMax: number;
}> {
  const seconds = envInt('BENCH_HOSTS_PGBENCH_S', 20, 1);
  const lags: number[] = [];
  let bytesMax = 0;
  await pgbench(ha, haPassword, ['-i', '-q', '-s', '10']);
  let done = false;
  const sampler = (async () => {
    const q =
      'SELECT coalesce(extract(epoch FROM replay_lag) * 1000, 0)::bigint, ' +
      'pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn)::bigint FROM pg_stat_replication';
    while (!done) {
      const out = await psql(ha, haPassword, q).catch(() => '');
      for (const line of out.split('\n').filter(Boolean)) {
        const [ms, bytes] = line.split('|').map(Number) as [number, number];
        lags.push(ms);
        bytesMax = Math.max(bytesMax, bytes);
      }
      await sleep(250);
    }
  })();
  const haRun = await pgbench(ha, haPassword, ['-n', '-c', '4', '-j', '2', '-T', String(seconds)]);
  done = true;
  await sampler;
  await pgbench(alone, alonePassword, ['-i', '-q', '-s', '10']);
  const aloneRun = await pgbench(alone, alonePassword, ['-n', '-c', '4', '-j', '2', '-T', String(seconds)]); // prettier-ignore
  const sorted = Float64Array.from(lags).sort();
  return {
    ha: haRun,
    alone: aloneRun,
    lagP50: lags.length ? percentile(sorted, 50) : NaN,
    lagP99: lags.length ? percentile(sorted, 99) : NaN,
    lagMax: lags.length ? (sorted[sorted.length - 1] as number) : NaN,
    bytesMax,
  };
}
