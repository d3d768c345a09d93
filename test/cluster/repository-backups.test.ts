// Backups off the database hosts (docs/decisions.md, "Several hosts":
// backups on the repository host), on the namespace topology: h1 is the
// repository host, h2 a database host. A service placed on h2 archives its
// WAL and takes its backups on h1, into a repository of an OS user of its
// own there, encrypted; nothing of the repository is on h2; and another
// service's client certificate is refused by that repository's server.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { psql } from '../e2e/clients.js';
import { cluster, until } from './cluster.js';

const run = promisify(execFile);
const PREFIX = 'rbk';
/** The topology's subnet, 10.231.11.0/24: its own, as the tests run in parallel. */
const NET = 11;

test(
  "a service's WAL and backups go to the repository host, encrypted, readable with its own certificate only",
  { timeout: 600_000 },
  async (t) => {
    const c = await cluster(t, { prefix: PREFIX, net: NET, hosts: 2, driver: 'hosts' });
    const { b, cli, address } = c;
    await c.joinAgent(1, { args: ['--role', 'repository'] });
    await c.joinAgent(2);
    await until(async () => {
      const listed = JSON.parse(await cli('host', 'list', '--json')) as { state: string }[];
      return listed.length === 2 && listed.every((h) => h.state === 'ONLINE');
    }, 60_000);

    const made: { id: string; password: string }[] = [];
    for (const name of ['a', 'b']) {
      const created = await b.call('POST', b.servicePath(), { name });
      assert.equal(created.status, 202, created.text);
      made.push({ id: created.body.service_id, password: created.body.initial_password });
    }
    const [a, other] = made as [(typeof made)[0], (typeof made)[0]];
    const ready = await b.waitForStatus(a.id, 'READY', 300_000);
    await b.waitForStatus(other.id, 'READY', 300_000);
    assert.equal(ready.endpoint.host, address(2));
    const port = ready.endpoint.port as number;

    // On the repository host, as the repository's own user: its first backup,
    // taken once it is READY.
    const repos = join(c.host(1).dataDir, 'repository', 'repos');
    // Users by number: they are in the hosts' own /etc (cluster.ts), not this one.
    const uidOn = (i: number, name: string) =>
      String(c.users(i).find((u) => u.name === name)?.uid ?? name);
    const info = async (id: string) => {
      const uid = uidOn(1, `basin-r-${id}`);
      const { stdout } = await run('setpriv', [
        `--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', '--',
        'pgbackrest', `--config=${join(repos, id, 'server.conf')}`, `--stanza=${id}`,
        '--output=json', 'info',
      ], { cwd: '/' }); // prettier-ignore
      return JSON.parse(stdout) as {
        status: { code: number };
        backup: { label: string; type: string }[];
        archive: { max: string | null }[];
      }[];
    };
    await until(async () => ((await info(a.id))[0]?.backup.length ?? 0) > 0, 180_000, 1000);

    const ca = join(c.inst.dataDir, 'services-ca.crt');
    writeFileSync(ca, await cli('host', 'ca'));
    const conn = `host=${address(2)} port=${port} user=tsdbadmin dbname=tsdb sslmode=verify-full sslrootcert=${ca} connect_timeout=10`;
    await psql(
      conn,
      a.password,
      "create table t (v text); insert into t select 'row ' || g from generate_series(1, 100) g",
    );
    const lsn = await psql(conn, a.password, 'select pg_walfile_name(pg_current_wal_lsn())');
    // A stop archives everything up to it (a segment switch, then the archiver waited for).
    assert.equal((await b.call('POST', `${b.servicePath(a.id)}/stop`)).status, 202);
    await b.waitForStatus(a.id, 'PAUSED', 180_000);

    await until(async () => ((await info(a.id))[0]?.archive[0]?.max ?? '') >= lsn, 180_000, 1000);
    const [stanza] = await info(a.id);
    assert.equal(stanza?.status.code, 0);
    assert.equal(stanza?.backup[0]?.type, 'full');

    // Encrypted: its info files and its WAL are OpenSSL's salted ciphertext,
    // not pgBackRest's text or lz4 frames.
    const repo = join(repos, a.id, 'repo');
    const head = (f: string) => readFileSync(f).subarray(0, 8).toString('latin1');
    assert.equal(head(join(repo, 'backup', a.id, 'backup.info')), 'Salted__');
    assert.equal(head(join(repo, 'archive', a.id, 'archive.info')), 'Salted__');
    const walDir = join(repo, 'archive', a.id, '15-1', lsn.slice(0, 16));
    const segment = readdirSync(walDir).find((f) => f.startsWith(lsn));
    assert.ok(segment, `no ${lsn} in ${walDir}`);
    assert.equal(head(join(walDir, segment)), 'Salted__');
    // The repository is its user's, which no tenant is.
    const owner = c.users(1).find((u) => u.name === `basin-r-${a.id}`);
    assert.ok(owner);
    assert.equal(statSync(repo).uid, owner.uid);
    assert.equal(statSync(repo).mode & 0o777, 0o700);

    // Nothing of the repository on the database host: no repository, no
    // pass, no repository server there.
    const local = join(c.host(2).dataDir, 'local');
    assert.ok(!existsSync(join(local, 'backup', a.id, 'repo')));
    assert.ok(!existsSync(join(local, 'repos', a.id)));
    const conf = readFileSync(join(local, 'backup', a.id, 'pgbackrest.conf'), 'utf8');
    assert.match(conf, new RegExp(`repo1-host=${address(1).replaceAll('.', '\\.')}`));
    assert.doesNotMatch(conf, /cipher/);

    // Another service's certificate (b's, from its side on h2, as b's OS
    // user: what b's tenant holds) is refused by a's repository server; a's
    // own, as a's user, is served. From h2's namespace, everything on the
    // command line.
    const scratch = mkdtempSync(join(tmpdir(), 'rbk-'));
    chmodSync(scratch, 0o1777);
    t.after(() => rmSync(scratch, { recursive: true, force: true }));
    const withCert = (id: string) =>
      run(
        'ip',
        [
          'netns',
          'exec',
          c.namespace(2),
          'setpriv',
          `--reuid=${uidOn(2, `basin-${id}`)}`,
          `--regid=${uidOn(2, `basin-${id}`)}`,
          '--clear-groups',
          '--',
          'pgbackrest',
          '--config=/dev/null',
          `--lock-path=${scratch}`,
          `--log-path=${scratch}`,
          '--log-level-file=off',
          `--repo1-host=${address(1)}`,
          '--repo1-host-type=tls',
          `--repo1-host-port=${port + 10_000}`,
          `--repo1-host-cert-file=${join(local, 'backup', id, 'client.crt')}`,
          `--repo1-host-key-file=${join(local, 'backup', id, 'client.key')}`,
          `--repo1-host-ca-file=${join(local, 'backup', id, 'ca.crt')}`,
          `--repo1-host-config=${join(repos, a.id, 'server.conf')}`,
          `--stanza=${a.id}`,
          '--output=json',
          'info',
        ],
        { cwd: '/' },
      ).then(
        // prettier-ignore
        (r) => ({ ok: true, out: r.stdout }),
        (err: { stdout?: string; stderr?: string }) => ({
          ok: false,
          out: `${err.stdout ?? ''}${err.stderr ?? ''}`,
        }),
      );
    // (`info` exits 0 with the repository's error in its status.)
    const own = await withCert(a.id);
    assert.ok(own.ok, own.out);
    const listed = JSON.parse(own.out) as { name: string; status: { code: number } }[];
    assert.equal(listed[0]?.name, a.id);
    assert.equal(listed[0]?.status.code, 0, own.out);
    const stranger = await withCert(other.id);
    assert.match(stranger.out, /\[105\]|access denied/, stranger.out);
    assert.doesNotMatch(stranger.out, /"code":0/, stranger.out);

    // Deletes remove each service's repository, its user and its server from the repository host.
    for (const m of made) assert.equal((await b.call('DELETE', b.servicePath(m.id))).status, 202);
    for (const m of made) await b.waitGone(m.id, 180_000);
    for (const m of made) assert.ok(!existsSync(join(repos, m.id)));
    assert.deepEqual(
      c.users(1).filter((u) => made.some((m) => u.name === `basin-r-${m.id}`)),
      [],
    );
    assert.equal((await b.stop()).code, 0);
  },
);
