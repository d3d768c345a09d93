// Issue 18, item 1: another tenant's data through a fork. Tried against
// Basin as shipped (`node dist/main.js`, the local driver), by a tenant A
// with a customer's means only: its project credential, and its service's
// OS user through `COPY … PROGRAM`. Before the fix, A made its repository's
// `backup/<A>` and `archive/<A>` links to B's right after Basin had read
// and owner-checked A's backup.info (an inotify watcher), asked for a fork
// of its own service, and Basin, as root, copied B's backup set and WAL
// through the links and restored them: the fork came up READY and its
// password opened B's tables. The NOW fork had the same flaw (Basin listed
// pg_wal through a link).
//
// Here A does all of it, several times, and the outcome is checked:
// - A lists B's backup in its own backup.info (forged: A owns the file), so
//   that Basin records it as A's and LAST_SNAPSHOT and PITR forks restore
//   it by its label; a watcher swaps A's `backup/<A>` and `archive/<A>`
//   with links to B's (renameat2 RENAME_EXCHANGE) as soon as anything
//   opens A's backup.info, and back a while later;
// - for NOW forks, a watcher swaps A's pg_wal with a link to B's as soon as
//   Basin's low-level backup ends (its backup history file is written: that
//   can crash A's own server, which then needs a new segment, and Basin
//   restarts it), and a loop swaps a directory of A's own in its data
//   directory with a link to B's data, over and over, while copies run.
// No fork ever holds B's table: each is A's own data (READY, opened with
// its initial password) or UNSTABLE with the reason in its logs; B is
// untouched. B's labels are timestamps to the second, which A can guess
// (the attacker did, from the times of B's directories); the test
// hands A the right one, as a guess that came out right: what is tested is
// that a right guess gets A nothing. Service ids are not secret either.
// test/local/safe-dir.test.ts and test/local/forks.test.ts prove the reader
// and the checks at the driver.

import assert from 'node:assert/strict';
import { lstatSync, readFileSync } from 'node:fs';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Layout } from '../../src/drivers/local/layout.js';
import { parseBackupInfo } from '../../src/drivers/local/config/pgbackrest.js';
import { installation } from './basin-process.js';
import { pgQuery } from './clients.js';
import { newTenant, TenantApi, tenantShell, type TenantShell } from './tenants.js';

/**
 * A's watcher, as A's OS user: puts links to B's directories in a directory
 * of A's (`link_dir`: on the same file system, outside what Basin copies),
 * waits for an inotify event (an open of backup.info in `backup/<A>`, or
 * Basin's backup history file written in pg_wal), swaps each name with its
 * link atomically (renameat2 RENAME_EXCHANGE), holds, swaps back, and waits
 * again; on SIGTERM it swaps back first. Writes what it did to a log.
 */
const WATCHER = `
import ctypes, os, signal, struct, sys, time
libc = ctypes.CDLL(None, use_errno=True)
IN_CLOSE_WRITE, IN_OPEN = 0x8, 0x20

def exchange(a, b):
    if libc.renameat2(-100, a.encode(), -100, b.encode(), 2) != 0:
        raise OSError(ctypes.get_errno(), 'renameat2 ' + a)

mode, log, hold, link_dir = sys.argv[1], open(sys.argv[2], 'a', buffering=1), float(sys.argv[3]), sys.argv[4]
if mode == 'repo':
    repo, me, their_backup, their_archive = sys.argv[5:9]
    pairs = [(repo + '/backup/' + me, their_backup), (repo + '/archive/' + me, their_archive)]
    watch, mask = repo + '/backup/' + me, IN_OPEN
    fires = lambda name, path: name == 'backup.info'
else:
    pgdata, their_wal = sys.argv[5:7]
    pairs = [(pgdata + '/pg_wal', their_wal)]
    watch, mask = pgdata + '/pg_wal', IN_CLOSE_WRITE
    fires = lambda name, path: name.endswith('.backup') and b'basin fork' in open(path, 'rb').read()
swaps, swapped = [], False
for i, (path, target) in enumerate(pairs):
    link = '%s/%d.link' % (link_dir, i)
    if os.path.lexists(link):
        os.unlink(link)
    os.symlink(target, link)
    swaps.append((path, link))

def swap(why):
    global swapped
    for path, link in swaps:
        exchange(path, link)
    swapped = not swapped
    log.write(why + '\\n')

def stop(*_):
    if swapped:
        swap('restored')
    os._exit(0)

signal.signal(signal.SIGTERM, stop)
log.write('armed\\n')
while True:
    fd = libc.inotify_init1(0)
    if libc.inotify_add_watch(fd, watch.encode(), mask) < 0:
        raise OSError(ctypes.get_errno(), 'inotify_add_watch')
    fired = False
    while not fired:
        buf, i = os.read(fd, 65536), 0
        while i < len(buf):
            _, _, _, n = struct.unpack_from('iIII', buf, i)
            name = buf[i + 16:i + 16 + n].rstrip(b'\\0').decode()
            i += 16 + n
            try:
                fired = fired or fires(name, watch + '/' + name)
            except OSError:
                pass
    os.close(fd)
    swap('swapped')
    time.sleep(hold)
    swap('restored')
`;

/**
 * A's loop: swaps its directory `path` with a link to `target` (in
 * `link_dir`), over and over; on SIGTERM, leaves the directory in place.
 */
const SWAPPER = `
import ctypes, os, signal, sys, time
libc = ctypes.CDLL(None, use_errno=True)
path, target, link_dir = sys.argv[1:4]
link = link_dir + '/stash.link'
if os.path.lexists(link):
    os.unlink(link)
os.symlink(target, link)
running = True
def stop(*_):
    global running
    running = False
signal.signal(signal.SIGTERM, stop)
while running:
    libc.renameat2(-100, path.encode(), -100, link.encode(), 2)
    time.sleep(0.0005)
if os.path.islink(path):
    libc.renameat2(-100, path.encode(), -100, link.encode(), 2)
`;

/**
 * A adds a backup to its own backup.info: B's label, started at `start`
 * (epoch s), with all WAL; and again whenever pgBackRest rewrote the file
 * without it (its backups and expiry save it), until killed.
 */
const FORGER = `
import json, os, sys, time
path, label, start = sys.argv[1], sys.argv[2], int(sys.argv[3])
entry = {
    'backup-archive-start': '000000010000000000000001',
    'backup-archive-stop': '0000000100000000000000FF',
    'backup-error': False,
    'backup-timestamp-start': start,
    'backup-timestamp-stop': start + 1,
    'backup-type': 'full',
}
line = '%s=%s' % (label, json.dumps(entry, separators=(',', ':')))
mine = None
while True:
    # Read only once pgBackRest replaced the file (a new inode): opening it
    # is what A's watcher waits for. (While the watcher holds its swap, the
    # path leads into B's repository, which A cannot enter.)
    try:
        if os.stat(path).st_ino != mine:
            text = open(path).read()
            if line not in text and '[backup:current]\\n' in text:
                text = text.replace('[backup:current]\\n', '[backup:current]\\n' + line + '\\n', 1)
                open(path + '.new', 'w').write(text)
                os.rename(path + '.new', path)
            mine = os.stat(path).st_ino
    except OSError:
        pass
    time.sleep(0.2)
`;

const b64 = (text: string) => Buffer.from(text).toString('base64');

/** A fork, as it settled: READY or UNSTABLE. */
interface Fork {
  id: string;
  password: string;
  status: string;
  port: number;
}

test(
  "a tenant's fork races never get it another tenant's data (LAST_SNAPSHOT, PITR, NOW)",
  { timeout: 1_500_000 },
  async (t) => {
    const inst = await installation(t, {
      // A backup of every service every 20 s (A's forged one is recorded at
      // its next), none expired.
      // The race this proves closed is the local repository's: on its path.
      args: ['--repository-servers', 'off', '--backup-schedule', '20s', '--pitr-window', '1d'],
      env: { BASIN_RECONCILE_INTERVAL_MS: '500' },
    });
    const b = await inst.start();
    const layout = new Layout(inst.dataDir);
    const victim = new TenantApi(b, await newTenant(inst, 'victim'));
    const attacker = new TenantApi(b, await newTenant(inst, 'attacker'));

    // B and A, created together; B: a table of its own, in a backup.
    const [bSvc, aSvc] = await Promise.all([victim.create('victim'), attacker.create('attacker')]);
    const bId = bSvc.service_id;
    await victim.waitForStatus(bId, 'READY');
    const marker = `B-SECRET-${Date.now()}`;
    await pgQuery(
      bSvc.endpoint.port,
      bSvc.initial_password,
      `CREATE TABLE b_secret AS SELECT '${marker}' AS v`,
    );
    const tableMade = Date.now();
    const bInfo = layout.backupInfo(bId);
    const bLabel = await b.waitFor(
      async () =>
        parseBackupInfo(readFileSync(bInfo, 'utf8')).find(
          (x) => Date.parse(x.startedAt) > tableMade + 1000,
        )?.label,
      "B's backup holding its table",
      120_000,
    );

    // A: a table of its own; its tenant inside it.
    const aId = aSvc.service_id;
    await attacker.waitForStatus(aId, 'READY');
    await pgQuery(
      aSvc.endpoint.port,
      aSvc.initial_password,
      "CREATE TABLE a_own AS SELECT 'A' AS v",
    );
    let a: TenantShell = await tenantShell(aSvc, aSvc.initial_password);
    t.after(() => a.end());
    /** A's session, made again after A's server was restarted (what A's own attacks can cause). */
    const shell = async (): Promise<TenantShell> => {
      try {
        await a.run('true');
      } catch {
        await a.end();
        await attacker.waitForStatus(aId, 'READY', 300_000);
        a = await tenantShell(aSvc, aSvc.initial_password);
      }
      return a;
    };
    // Where things are, as A finds them from its own data directory.
    const [pgdata = ''] = await a.run('pwd');
    const local = pgdata.replace(/\/instances\/[^/]+\/0\/pgdata$/, '');
    assert.notEqual(local, pgdata);
    const aRepo = `${local}/backup/${aId}/repo`;
    const bRepo = `${local}/backup/${bId}/repo`;
    const bPgdata = `${local}/instances/${bId}/0/pgdata`;
    // A's socket directory: A's, on the same file system, never copied, kept across restarts.
    const aSockets = `${local}/s/${aId}-0`;

    /** Runs `script` (Python) as A's OS user, detached; returns its pid. */
    const detached = async (name: string, script: string, args: string[]) => {
      const sh = await shell();
      await sh.run(`echo ${b64(script)} | base64 -d > /tmp/${name}.py`);
      const quoted = args.map((x) => `'${x}'`).join(' ');
      const [pid] = await sh.run(
        `setsid /usr/bin/python3 /tmp/${name}.py ${quoted} </dev/null >/dev/null 2>&1 & echo $!`,
      );
      return pid as string;
    };
    /** Whether process `pid` of A's still runs (a restart of A's server ends them all). */
    const alive = async (pid: string) =>
      (await (await shell()).run(`kill -0 ${pid} 2>/dev/null && echo yes || echo no`))[0] === 'yes';
    const stop = async (pid: string) => {
      await (await shell()).run(`kill ${pid} 2>/dev/null; sleep 0.3; true`);
    };
    const swaps = async (log: string) =>
      (await (await shell()).run(`cat ${log} 2>/dev/null || true`)).filter((l) => l === 'swapped')
        .length;

    /** A's fork, asked for once A's service is READY; settled READY or UNSTABLE. */
    const fork = async (body: Record<string, unknown>): Promise<Fork> => {
      await attacker.waitForStatus(aId, 'READY', 300_000);
      const res = await attacker.call('POST', `${attacker.path(aId)}/forkService`, body);
      assert.equal(res.status, 202, res.text);
      const id: string = res.body.service_id;
      const settled = await b.waitFor(
        async () => {
          const got = await attacker.call('GET', attacker.path(id));
          return ['READY', 'UNSTABLE'].includes(got.body?.status) ? got.body : undefined;
        },
        `fork ${id} READY or UNSTABLE`,
        300_000,
      );
      return {
        id,
        password: res.body.initial_password,
        status: settled.status,
        port: settled.endpoint.port,
      };
    };

    /** A fork's outcome, checked: A's own data, or UNSTABLE with its reason; never B's table. */
    const outcomes: { strategy: string; status: string; reason?: string }[] = [];
    const check = async (strategy: string, f: Fork) => {
      if (f.status === 'READY') {
        const [has] = await pgQuery(
          f.port,
          f.password,
          `SELECT to_regclass('public.b_secret') IS NOT NULL AS b,
                  to_regclass('public.a_own') IS NOT NULL AS a`,
        );
        if (has.b) {
          const leaked = await pgQuery(f.port, f.password, 'SELECT v FROM b_secret');
          assert.fail(`fork ${f.id} (${strategy}) holds B's table: ${JSON.stringify(leaked)}`);
        }
        assert.equal(has.a, true, `fork ${f.id} (${strategy}) is not A's data`);
        const own = await pgQuery(f.port, f.password, 'SELECT v FROM a_own');
        assert.deepEqual(own, [{ v: 'A' }], `fork ${f.id} (${strategy}) is A's own data`);
        outcomes.push({ strategy, status: 'READY' });
      } else {
        const logs = await attacker.call('GET', `${attacker.path(f.id)}/logs?search=basin:`);
        assert.equal(logs.status, 200, logs.text);
        const error = (logs.body.entries as { severity: string; message: string }[]).find(
          (e) => e.severity === 'ERROR',
        );
        assert.ok(error, `fork ${f.id} is UNSTABLE without a reason: ${logs.text}`);
        outcomes.push({ strategy, status: 'UNSTABLE', reason: error.message });
      }
      await attacker.deleteAndWait(f.id);
    };

    await t.test(
      'LAST_SNAPSHOT and PITR: links swapped in as Basin reads the repository',
      async () => {
        // Once A's first backup is in its backup.info (pgBackRest writes the
        // file at a backup's end), B's backup is added to it, as if it were
        // A's, started half a minute from now: A's next scheduled backup
        // records it instead of taking one, and forks restore it by label.
        const info = `${aRepo}/backup/${aId}/backup.info`;
        await b.waitFor(
          async () => (await a.run(`grep -c '^[0-9-]*F=' '${info}' || true`))[0] !== '0',
          "A's first backup listed",
          120_000,
        );
        const start = Math.floor(Date.now() / 1000) + 30;
        const forging = [info, bLabel, String(start)];
        let forger = await detached('forger', FORGER, forging);
        const log = `${aSockets}/repo-watcher.log`;
        const args = [
          'repo',
          log,
          '3',
          aRepo,
          aRepo,
          aId,
          `${bRepo}/backup/${bId}`,
          `${bRepo}/archive/${bId}`,
        ];
        let watcher = await detached('repo-watcher', WATCHER, args);
        const namesLabel = (o: { reason?: string }) => o.reason?.includes(bLabel) === true;
        try {
          while (Date.now() < (start + 3) * 1000) await sleep(1000);
          // Until a fork went for B's backup by its label, and at least four
          // times (on a loaded machine the watcher's swap wins the race more
          // often, and a fork fails at the link before it reads the label).
          for (let i = 0; i < 24; i++) {
            if (!(await alive(watcher))) watcher = await detached('repo-watcher', WATCHER, args);
            if (!(await alive(forger))) forger = await detached('forger', FORGER, forging);
            const strategy = i % 2 === 0 ? 'LAST_SNAPSHOT' : 'PITR';
            const body =
              strategy === 'PITR'
                ? { fork_strategy: 'PITR', target_time: new Date().toISOString() }
                : { fork_strategy: 'LAST_SNAPSHOT' };
            await check(strategy, await fork(body));
            if (i >= 3 && outcomes.some(namesLabel)) break;
          }
        } finally {
          await stop(forger);
          await stop(watcher);
        }
        assert.ok((await swaps(log)) > 0, 'the watcher swapped');
        // Basin recorded the forged backup and a fork went for it by label: refused.
        assert.ok(outcomes.some(namesLabel), JSON.stringify(outcomes));
        for (const o of outcomes.filter((x) => x.status === 'UNSTABLE')) {
          assert.match(
            o.reason ?? '',
            new RegExp(`${bLabel}|symbolic link|not its parent's`),
            o.reason,
          );
        }
      },
    );

    await t.test(
      "NOW: pg_wal swapped for B's as the copy ends; a directory swapped in a loop",
      async () => {
        const before = outcomes.length;
        const log = `${aSockets}/now-watcher.log`;
        const args = ['now', log, '0.2', aSockets, pgdata, `${bPgdata}/pg_wal`];
        let watcher = '';
        try {
          for (let i = 0; i < 3; i++) {
            await attacker.waitForStatus(aId, 'READY', 300_000);
            if (watcher === '' || !(await alive(watcher))) {
              watcher = await detached('now-watcher', WATCHER, args);
            }
            await check('NOW', await fork({ fork_strategy: 'NOW' }));
          }
        } finally {
          if (watcher !== '') await stop(watcher);
        }
        assert.ok((await swaps(log)) > 0, 'the watcher swapped');
        // A directory of A's own, and a link to B's data, swapped over and over.
        await (await shell()).run('mkdir -p stash && echo A > stash/own');
        let swapper = '';
        try {
          for (let i = 0; i < 2; i++) {
            await attacker.waitForStatus(aId, 'READY', 300_000);
            if (swapper === '' || !(await alive(swapper))) {
              swapper = await detached('swapper', SWAPPER, [
                `${pgdata}/stash`,
                `${bPgdata}/base`,
                aSockets,
              ]);
            }
            await check('NOW', await fork({ fork_strategy: 'NOW' }));
          }
        } finally {
          if (swapper !== '') await stop(swapper);
        }
        assert.equal(outcomes.length - before, 5);
      },
    );

    await t.test('B is untouched: its table, its status, its repository', async () => {
      const rows = await pgQuery(
        bSvc.endpoint.port,
        bSvc.initial_password,
        'SELECT v FROM b_secret',
      );
      assert.deepEqual(rows, [{ v: marker }]);
      assert.equal((await victim.call('GET', victim.path(bId))).body.status, 'READY');
      assert.ok(lstatSync(`${bRepo}/backup/${bId}`).isDirectory());
      assert.ok(lstatSync(`${bPgdata}/pg_wal`).isDirectory());
      assert.ok(parseBackupInfo(readFileSync(bInfo, 'utf8')).some((x) => x.label === bLabel));
    });
    t.diagnostic(`fork outcomes: ${JSON.stringify(outcomes)}`);
  },
);
