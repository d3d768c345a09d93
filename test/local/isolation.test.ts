// Services are isolated from each other by the OS: each service's clusters
// run as an OS user of its own (docs/security.md). PostgreSQL 15's
// CREATEROLE, which the spec gives tsdbadmin, lets tsdbadmin grant itself
// pg_execute_server_program and pg_read_server_files and so run programs
// and read files as the OS user of its cluster; what that reaches is what
// these tests check, with two real services made through the API (so that
// Basin's own database is there too).

import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { existsSync, lstatSync, readdirSync, readFileSync, readlinkSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import pg from 'pg';
import { setTsdbadminPassword } from '../../src/drivers/local/node/admin.js';
import { Layout, socketName } from '../../src/drivers/local/layout.js';
import { readPasswd, type OsUser } from '../../src/drivers/local/host/os-user.js';
import { processesOfUser } from '../../src/drivers/local/host/processes.js';
import { serviceUserName } from '../../src/drivers/local/host/service-users.js';
import { scramVerifier } from '../../src/lib/secrets.js';
import { serviceNetwork } from '../e2e/basin-process.js';
import { claimPortBlock } from '../harness/port-block.js';
import { eventually, startBasin, type TestBasin } from '../helpers.js';
import { cleanUpDataDir, makeDataDir, postmasterPid, serviceUsersOf } from './helpers.js';

const execFileP = promisify(execFile);

interface Svc {
  service_id: string;
  endpoint: { host: string; port: number };
  initial_password: string;
}

/** A tsdbadmin session of `svc`; ended by the caller. */
async function tsdbadmin(svc: Svc): Promise<pg.Client> {
  const c = new pg.Client({
    host: '127.0.0.1',
    port: svc.endpoint.port,
    user: 'tsdbadmin',
    password: svc.initial_password,
    database: 'tsdb',
    ssl: { rejectUnauthorized: false },
    connectionTimeoutMillis: 5000,
  });
  c.on('error', () => {});
  await c.connect();
  return c;
}

/** The output lines of `program`, run by the server through COPY … FROM PROGRAM. */
async function fromProgram(c: pg.Client, program: string): Promise<string[]> {
  await c.query('CREATE TEMP TABLE IF NOT EXISTS program_out (line text)');
  await c.query('TRUNCATE program_out');
  // A delimiter no output has: every line is one value, tabs and all.
  await c.query(
    `COPY program_out FROM PROGRAM ${c.escapeLiteral(program)} WITH (DELIMITER E'\\x01')`,
  );
  const { rows } = await c.query<{ line: string }>('SELECT line FROM program_out');
  return rows.map((r) => r.line);
}

/**
 * Runs `command` through COPY … FROM PROGRAM and asserts that the OS refused
 * it: it failed, saying so. (The program itself succeeds, so that its
 * output, which says why, comes back.) Where the server runs in a mount
 * namespace of its own, what lies above the driver's tree (basin.db) is not
 * even there: `hidden` accepts that too.
 */
async function refusedByOs(c: pg.Client, command: string, hidden = false): Promise<void> {
  const out = await fromProgram(c, `${command} 2>&1; echo "exit=$?"`);
  assert.notEqual(out.at(-1), 'exit=0', `${command} succeeded: ${out.join(' | ')}`);
  const why = hidden ? REFUSED_OR_HIDDEN : REFUSED;
  assert.match(out.join('\n'), why, command);
}

const REFUSED = /Permission denied|Operation not permitted/;
const REFUSED_OR_HIDDEN = /Permission denied|Operation not permitted|No such file or directory/;

function user(name: string): OsUser {
  const e = readPasswd().find((p) => p.name === name);
  assert.ok(e, `no OS user ${name}`);
  return e;
}

/** The real, effective, saved and filesystem uids of a process. */
function uidsOf(pid: number): number[] {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return (/^Uid:\s+(.*)$/m.exec(status)?.[1] ?? '').trim().split(/\s+/).map(Number);
}

/** Every path under `dir` (itself included), without following links. */
function walk(dir: string): string[] {
  const out = [dir];
  if (!lstatSync(dir).isDirectory()) return out;
  for (const name of readdirSync(dir)) out.push(...walk(join(dir, name)));
  return out;
}

/** Which of `paths` `u` may read and write (access(2) as that user, in a process of its own). */
function accessAs(u: OsUser, paths: string[]): { readable: string[]; writable: string[] } {
  const script = `
    const { accessSync, constants } = require('node:fs');
    const can = (p, m) => { try { accessSync(p, m); return true; } catch { return false; } };
    const paths = JSON.parse(require('node:fs').readFileSync(0, 'utf8'));
    process.stdout.write(JSON.stringify({
      readable: paths.filter((p) => can(p, constants.R_OK)),
      writable: paths.filter((p) => can(p, constants.W_OK)),
    }));`;
  const res = spawnSync(process.execPath, ['-e', script], {
    uid: u.uid,
    gid: u.gid,
    cwd: '/',
    env: { PATH: '/usr/bin:/bin' },
    input: JSON.stringify(paths),
    encoding: 'utf8',
  });
  assert.equal(res.status, 0, res.stderr);
  return JSON.parse(res.stdout);
}

async function status(b: TestBasin, id: string, want: string): Promise<void> {
  await eventually(
    async () =>
      (await b.call('GET', `/v1/projects/${b.projectId}/services/${id}`)).body?.status === want,
    `${id} ${want}`,
    90_000,
  );
}

async function create(b: TestBasin, name: string): Promise<Svc> {
  const res = await b.call('POST', `/v1/projects/${b.projectId}/services`, {
    name,
    addons: [],
    cpu_millis: 'shared',
    memory_gbs: 'shared',
  });
  assert.equal(res.status, 202, JSON.stringify(res.body));
  return res.body as Svc;
}

test(
  "a service's tsdbadmin acts as its own OS user and reaches nothing else",
  { timeout: 300_000 },
  async (t) => {
    assert.equal(process.getuid?.(), 0, 'per-service OS users need root: run the suite as root');
    // Cleaned up after Basin is closed (hooks run in the order they are
    // registered), whatever the test left.
    const dataDir = makeDataDir();
    // Ports and a service network of its own: another test's installation
    // may run beside it (its veths hold addresses of the default block).
    const block = await claimPortBlock();
    t.after(() => block.release());
    const env = {
      BASIN_DRIVER: 'local',
      BASIN_RECONCILE_INTERVAL_MS: '200',
      BASIN_PORT_RANGE: block.portRange,
      BASIN_SERVICE_NETWORK: serviceNetwork(block.claimed),
      // Local repositories, the service user's own, whose modes and reach
      // this test checks; repository servers (the default) have theirs:
      // test/local/repository-servers.test.ts, attack-repository.test.ts.
      BASIN_REPOSITORY_SERVERS: 'off',
    };
    const b = await startBasin(t, { dataDir, env });
    t.after(() => cleanUpDataDir(dataDir));
    const layout = new Layout(b.config.dataDir);
    const [a, other] = await Promise.all([create(b, 'tenant-a'), create(b, 'tenant-b')]);
    await Promise.all([status(b, a.service_id, 'READY'), status(b, other.service_id, 'READY')]);
    // Each service's first backup is taken once it is READY: its repository
    // holds a backup, and nothing is being written into it any more.
    for (const id of [a.service_id, other.service_id]) {
      await eventually(
        async () => (await b.basin.store.backups.listByService(id)).length > 0,
        `a backup of ${id}`,
        90_000,
      );
    }
    const aNode = { id: a.service_id, node: 0 };
    const bNode = { id: other.service_id, node: 0 };
    const aUser = user(serviceUserName(a.service_id));
    const bUser = user(serviceUserName(other.service_id));
    const postgres = user('postgres');
    const c = await tsdbadmin(a);
    t.after(() => c.end().catch(() => {}));

    await t.test(
      'every service has an OS user of its own, which owns its files and runs its server',
      () => {
        assert.equal(aUser.name, `basin-${a.service_id}`);
        assert.notEqual(aUser.uid, bUser.uid);
        assert.notEqual(aUser.uid, postgres.uid);
        assert.deepEqual(
          serviceUsersOf(dataDir)
            .map((u) => u.name)
            .sort(),
          [aUser.name, bUser.name].sort(),
        );
        for (const [path, mode] of [
          [layout.pgdata(aNode), 0o700],
          [layout.socketDir(aNode), 0o700],
          ...Object.values(layout.backupDirs(a.service_id)).map((d) => [d, 0o700] as const),
          [join(layout.pgdata(aNode), 'server.key'), 0o600],
        ] as const) {
          const st = statSync(path);
          assert.equal(st.uid, aUser.uid, `${path} belongs to uid ${st.uid}`);
          assert.equal(st.mode & 0o777, mode, `${path} has mode ${(st.mode & 0o777).toString(8)}`);
        }
        // Its pgBackRest configuration is Basin's, readable by its own group alone.
        const conf = statSync(layout.backupConf(a.service_id));
        assert.deepEqual([conf.uid, conf.gid, conf.mode & 0o777], [0, aUser.gid, 0o640]);
        // Basin's own records beside the data directory stay root's.
        for (const path of [layout.stateFile(aNode), layout.startupLog(aNode)]) {
          const st = statSync(path);
          assert.equal(st.uid, 0, path);
          assert.equal(st.mode & 0o777, 0o600, path);
        }
        assert.equal(statSync(layout.templatePgdata).uid, postgres.uid);
        assert.equal(statSync(layout.caKey).mode & 0o777, 0o600);
        assert.equal(statSync(layout.caDir).mode & 0o777, 0o700);
        assert.equal(statSync(join(dataDir, 'basin.db')).mode & 0o777, 0o600);
        // Searchable (PostgreSQL reaches local/ through it), not listable.
        assert.equal(statSync(dataDir).mode & 0o777, 0o701);
        const pm = postmasterPid(layout.pgdata(aNode));
        assert.deepEqual(uidsOf(pm), [aUser.uid, aUser.uid, aUser.uid, aUser.uid]);
        // Nothing of Basin's is open in the server: only its own files, and
        // its output (startup.log, opened by root, write-only).
        const own = [
          layout.pgdata(aNode),
          layout.socketDir(aNode),
          ...Object.values(layout.backupDirs(a.service_id)),
        ];
        for (const fd of readdirSync(`/proc/${pm}/fd`)) {
          const target = readlinkSync(`/proc/${pm}/fd/${fd}`);
          if (!target.startsWith(dataDir)) continue;
          assert.ok(
            own.some((d) => target.startsWith(`${d}/`)) || target === layout.startupLog(aNode),
            `the server has ${target} open`,
          );
        }
      },
    );

    await t.test(
      'tsdbadmin may still grant itself the server-side roles (CREATEROLE)',
      async () => {
        await c.query(
          'GRANT pg_execute_server_program, pg_read_server_files, pg_write_server_files TO tsdbadmin',
        );
        const { rows } = await c.query(
          "SELECT pg_has_role('pg_execute_server_program', 'MEMBER') AS exec, rolcreaterole, rolsuper FROM pg_roles WHERE rolname = current_user",
        );
        assert.deepEqual(rows, [{ exec: true, rolcreaterole: true, rolsuper: false }]);
      },
    );

    await t.test("COPY … PROGRAM runs as the service's OS user, not postgres", async () => {
      assert.deepEqual(await fromProgram(c, 'id -un'), [aUser.name]);
      assert.deepEqual(await fromProgram(c, 'id -u'), [String(aUser.uid)]);
      // Its own files are its own.
      assert.deepEqual(await fromProgram(c, `cat ${layout.pgdata(aNode)}/PG_VERSION`), ['15']);
    });

    await t.test(
      "another service's files, Basin's database and the CA key are out of reach",
      async () => {
        const bPgdata = layout.pgdata(bNode);
        const forbidden = [
          `cat ${bPgdata}/PG_VERSION`,
          `cat ${bPgdata}/server.key`,
          `ls ${bPgdata}`,
          `ls ${layout.socketDir(bNode)}`,
          // B's backups and archived WAL (what its forks are made from),
          // its pgBackRest configuration, and the list of stanzas.
          `ls ${layout.backupDirs(other.service_id).repo}`,
          `cat ${layout.backupInfo(other.service_id)}`,
          `touch ${layout.backupDirs(other.service_id).repo}/planted`,
          `ls ${layout.backupDirs(other.service_id).spool}`,
          `cat ${layout.backupConf(other.service_id)}`,
          `ls ${layout.backupsDir}`,
          `cat ${layout.stateFile(bNode)}`,
          `cat ${layout.caKey}`,
          `ls ${dataDir}`,
          `ls ${layout.instancesDir}`,
          `ls ${layout.templatePgdata}`,
          `kill -0 ${postmasterPid(bPgdata)}`,
        ];
        for (const command of forbidden) await refusedByOs(c, command);
        for (const file of ['basin.db', 'basin.db-wal']) {
          await refusedByOs(c, `cat ${join(dataDir, file)}`, true);
        }
        // Server-side COPY (pg_read_server_files, pg_write_server_files) is
        // checked by the OS the same way.
        for (const [file, why] of [
          [join(bPgdata, 'PG_VERSION'), REFUSED],
          [join(dataDir, 'basin.db'), REFUSED_OR_HIDDEN],
        ] as const) {
          await assert.rejects(
            c.query(`COPY program_out FROM ${c.escapeLiteral(file)}`),
            why,
            file,
          );
        }
        await assert.rejects(
          c.query(`COPY (SELECT 1) TO ${c.escapeLiteral(join(bPgdata, 'planted'))}`),
          /Permission denied/,
        );
        // Nor can it reach the other server's socket (where its superuser is).
        await refusedByOs(c, `psql -h ${layout.socketDir(bNode)} -U postgres -c 'select 1'`);
      },
    );

    await t.test(
      "nothing under the data directory but the service's own is readable or writable by it",
      () => {
        const own = [
          layout.pgdata(aNode),
          layout.socketDir(aNode),
          ...Object.values(layout.backupDirs(a.service_id)),
        ];
        const isOwn = (p: string) => own.some((d) => p === d || p.startsWith(`${d}/`));
        // Harmless, and public on purpose: what built the template; and its
        // own pgBackRest configuration (read, not written: Basin's).
        const isPublic = (p: string) =>
          p === layout.templateMarker || p === layout.backupConf(a.service_id);
        const paths = walk(dataDir);
        assert.ok(paths.length > 1000, `only ${paths.length} paths`);
        const { readable, writable } = accessAs(aUser, paths);
        assert.deepEqual(
          readable.filter((p) => !isOwn(p) && !isPublic(p)),
          [],
        );
        assert.deepEqual(
          writable.filter((p) => !isOwn(p)),
          [],
        );
        assert.ok(readable.includes(join(layout.pgdata(aNode), 'PG_VERSION')));
      },
    );

    await t.test("a link to another service's socket does not lead Basin there", async () => {
      // As A: where A's socket was, a link to B's. Basin (root) follows links
      // and is every server's superuser: a password change of A's (which A
      // can ask for through the API) must not land on B.
      const aSocket = join(layout.socketDir(aNode), socketName(a.endpoint.port));
      const bSocket = join(layout.socketDir(bNode), socketName(other.endpoint.port));
      await fromProgram(c, `ln -sf ${bSocket} ${aSocket}; echo linked`);
      assert.ok(lstatSync(aSocket).isSymbolicLink());
      const target = {
        socketDir: layout.socketDir(aNode),
        port: a.endpoint.port,
        pgdata: layout.pgdata(aNode),
      };
      await assert.rejects(
        setTsdbadminPassword(target, scramVerifier('chosen-by-tenant-a')),
        /runs ".*", not /,
      );
      // B's password is still B's.
      const cb = await tsdbadmin(other);
      await cb.end();
    });

    await t.test(
      'deleting a service ends what its tsdbadmin started and removes its OS user',
      async () => {
        const marker = `/tmp/basin-isolation-${a.service_id}`;
        await fromProgram(c, 'setsid sleep 600 </dev/null >/dev/null 2>&1 & echo started');
        await fromProgram(
          c,
          `echo left > ${marker}; echo left > /dev/shm/basin-${a.service_id}; echo ok`,
        );
        // Its key, not its id: with an IPC namespace of its own (confine.ts)
        // ids are the namespace's, keys are random.
        const [key] = await fromProgram(
          c,
          'ipcmk -M 4096 >/dev/null && ipcs -m | grep -o "^0x[0-9a-f]*" | tail -1',
        );
        assert.ok((await processesOfUser(aUser.uid)).length > 0);
        // The host sees the file unless the server has a /tmp of its own.
        assert.deepEqual(await fromProgram(c, `test -e ${marker} && echo there`), ['there']);
        await c.end();

        const res = await b.call('DELETE', `/v1/projects/${b.projectId}/services/${a.service_id}`);
        assert.equal(res.status, 202);
        await eventually(
          async () =>
            (await b.call('GET', `/v1/projects/${b.projectId}/services/${a.service_id}`)).status ===
            404,
          'gone',
          60_000,
        );
        await assert.rejects(execFileP('getent', ['passwd', aUser.name]));
        await assert.rejects(execFileP('getent', ['group', aUser.name]));
        assert.deepEqual(await processesOfUser(aUser.uid), []);
        assert.equal(existsSync(marker), false);
        assert.equal(existsSync(`/dev/shm/basin-${a.service_id}`), false);
        const shm = readFileSync('/proc/sysvipc/shm', 'utf8').split('\n').slice(1);
        assert.ok(
          !shm.some((line) => Number(line.trim().split(/\s+/)[0]) === Number(key)),
          `shm ${key} is left`,
        );
        assert.equal(existsSync(layout.instanceDir(a.service_id)), false);
        // The other service is untouched.
        const cb = await tsdbadmin(other);
        try {
          assert.deepEqual((await cb.query('SELECT 1 AS one')).rows, [{ one: 1 }]);
        } finally {
          await cb.end();
        }
        assert.ok(readPasswd().some((p) => p.name === bUser.name));
      },
    );
  },
);
