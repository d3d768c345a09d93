// A service's three nodes under Patroni (src/drivers/local/patroni/), each
// on a "host" of the namespace topology (topology.sh) with an address of its
// own, one etcd member started here in the root namespace, TLS everywhere
// (etcd's clients, Patroni's REST API, replication). One synchronous standby
// with synchronous_mode_strict: a leader is elected from Basin's template,
// the standbys stream over TLS, rows committed on the primary are read on a
// standby; the primary's Patroni and PostgreSQL killed with SIGKILL, the
// synchronous standby is promoted with every acknowledged commit; the old
// primary, started again, rejoins as a standby and refuses writes.
//
// Everything it makes has a fixed name (the topology's prefix, the OS user,
// the directory), removed at the end and, after a killed run, at the next
// start.

import assert from 'node:assert/strict';
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  mkdirSync,
  openSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import pg from 'pg';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ServiceSpec } from '../../src/drivers/driver.js';
import { PATRONI_TIMING } from '../../src/drivers/hosts/ha-nodes.js';
import { detectPrivateTmp, isConfined } from '../../src/drivers/local/host/confine.js';
import { pgInstall } from '../../src/drivers/local/host-check.js';
import { type OsUser, resolveOsUser } from '../../src/drivers/local/host/os-user.js';
import {
  clusterProcesses,
  processesOfUser,
  procCmdline,
  signalAll,
} from '../../src/drivers/local/host/processes.js';
import { Layout } from '../../src/drivers/local/layout.js';
import { type AdminTarget, withAdmin } from '../../src/drivers/local/node/admin.js';
import { writeRootFile } from '../../src/drivers/local/node/node-files.js';
import { postmasterStatus } from '../../src/drivers/local/node/postmaster.js';
import { Template } from '../../src/drivers/local/node/template.js';
import {
  apiGet,
  apiRequest,
  type ClientTls,
  clusterState,
  isPrimary,
} from '../../src/drivers/local/patroni/client.js';
import {
  ensurePatroniDirs,
  patroniFiles,
  prepareSeed,
  type PatroniFiles,
} from '../../src/drivers/local/patroni/files.js';
import {
  type PatroniInputs,
  type PatroniMember,
  renderPatroniConfig,
} from '../../src/drivers/local/patroni/patroni-config.js';
import {
  patroniStatus,
  startPatroni,
  stopPatroni,
} from '../../src/drivers/local/patroni/patroni.js';
import { type KeyPair, makeCa, makeKeyAndRequest, signRequest } from '../../src/lib/x509.js';
import { silentLogger } from '../../src/lib/logger.js';
import { ROOT } from '../harness/root.js';
import { freePort } from '../harness/postmaster.js';

const TOPOLOGY = join(ROOT, 'test/cluster/topology.sh');
const PREFIX = 'ptn';
/** This test's subnet, 10.231.7.0/24 (k=7: the Patroni work's own). */
const NET = 7;
const BRIDGE = `10.231.${NET}.1`;
/** Node i runs on host i+1. */
const address = (i: number) => `10.231.${NET}.${11 + i}`;
const USER = 'basin-ptntest';
const DIR = join(tmpdir(), 'basin-patroni-test');
const SERVICE = 'ptnsvc0001';
const API_PORT = 8008;

/**
 * The hosts of topology.sh (the same names and addresses), but with their
 * bridge in a namespace of its own (`<prefix>-sw`), joined to the root
 * namespace by a veth (`<prefix>-br`, the bridge's address). Bridged
 * traffic goes through the IP forward hook where the bridge is
 * (br_netfilter), and the root namespace's may hold other tests' nft
 * tables that drop what they do not know (service networks' forward
 * chains): there, the nodes' replication was cut at random.
 */
function topologyUp(n: number): void {
  const ip = (...args: string[]) => execFileSync('ip', args);
  const sw = `${PREFIX}-sw`;
  ip('netns', 'add', sw);
  ip('-n', sw, 'link', 'set', 'lo', 'up');
  ip('-n', sw, 'link', 'add', 'sw0', 'type', 'bridge');
  ip('-n', sw, 'link', 'set', 'sw0', 'up');
  ip('link', 'add', `${PREFIX}-br`, 'type', 'veth', 'peer', 'name', 'up0', 'netns', sw);
  ip('addr', 'add', `${BRIDGE}/24`, 'dev', `${PREFIX}-br`);
  ip('link', 'set', `${PREFIX}-br`, 'up');
  ip('-n', sw, 'link', 'set', 'up0', 'master', 'sw0', 'up');
  for (let i = 1; i <= n; i++) {
    const ns = `${PREFIX}-h${i}`;
    ip('netns', 'add', ns);
    ip('-n', sw, 'link', 'add', `h${i}`, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns);
    ip('-n', sw, 'link', 'set', `h${i}`, 'master', 'sw0', 'up');
    ip('-n', ns, 'addr', 'add', `10.231.${NET}.${10 + i}/24`, 'dev', 'eth0');
    ip('-n', ns, 'link', 'set', 'eth0', 'up');
    ip('-n', ns, 'link', 'set', 'lo', 'up');
    ip('-n', ns, 'route', 'add', 'default', 'via', BRIDGE);
  }
}

async function cleanUp(): Promise<void> {
  // The hosts' namespaces, their processes and the root's veth (topology.sh), then the switch's.
  execFileSync('bash', [TOPOLOGY, 'down', PREFIX]);
  try {
    execFileSync('ip', ['netns', 'delete', `${PREFIX}-sw`], { stdio: 'ignore' });
  } catch {
    // none
  }
  // The etcd this test started (a killed run's too): its pid, recorded, if it is still that etcd.
  try {
    const pid = Number(readFileSync(join(DIR, 'etcd.pid'), 'utf8'));
    if ((await procCmdline(pid)).includes(join(DIR, 'etcd'))) signalAll([pid], 'SIGKILL');
  } catch {
    // none
  }
  let uid: number | undefined;
  try {
    uid = resolveOsUser(USER).uid;
  } catch {
    // no such user
  }
  if (uid !== undefined) {
    for (let i = 0; i < 50; i++) {
      const pids = await processesOfUser(uid);
      if (pids.length === 0) break;
      signalAll(pids, 'SIGKILL');
      await sleep(100);
    }
    execFileSync('userdel', [USER]);
  }
  rmSync(DIR, { recursive: true, force: true });
}

const spec: ServiceSpec = {
  serviceId: SERVICE,
  projectId: 'ptnproject',
  type: 'POSTGRES',
  vector: false,
  size: { shared: true, cpuMillis: 500, memoryGbs: 0.5 },
  environment: 'DEV',
  running: true,
  port: 5432,
  passwordVerifier: '',
  pooler: { enabled: false, port: null },
  allowedCidrs: [],
  ha: { replicaCount: 2, syncReplicaCount: 1 },
  nodes: [0, 1, 2].map((i) => ({ index: i, role: i === 0 ? 'primary' : 'standby', port: 5433 })),
  source: { kind: 'empty' },
  createdAt: new Date().toISOString(),
};

interface Node {
  index: number;
  files: PatroniFiles;
  user: OsUser;
  url: string;
  admin: AdminTarget;
}

test(
  'three nodes under Patroni: a leader from the template, TLS streaming, a synchronous standby promoted with every acknowledged commit, the old primary rewound',
  { timeout: 600_000 },
  async (t) => {
    await cleanUp();
    t.after(cleanUp);
    topologyUp(3);
    mkdirSync(DIR, { mode: 0o711 });
    chmodSync(DIR, 0o711);
    execFileSync('useradd', ['--system', '--no-create-home', '--home-dir', '/nonexistent',
      '--shell', '/usr/sbin/nologin', '--comment', 'basin patroni test', USER]); // prettier-ignore
    const svc = resolveOsUser(USER);

    // The installation's CA, and what it issues: etcd's server, the
    // service's etcd identity, each node's server (PostgreSQL and the REST
    // API), Basin's client certificate.
    const tls = join(DIR, 'tls');
    mkdirSync(tls, { mode: 0o711 });
    const ca = await makeCa('basin patroni test CA');
    const issue = async (cn: string, names: string[]): Promise<KeyPair> => {
      const req = await makeKeyAndRequest(cn);
      return { cert: await signRequest(ca, req.csr, { cn, names, days: 2 }), key: req.key };
    };
    const put = (name: string, text: string, owner?: OsUser) => {
      const path = join(tls, name);
      writeFileSync(path, text, { mode: 0o600 });
      if (owner) chownSync(path, owner.uid, owner.gid);
      else chmodSync(path, 0o644);
      return path;
    };
    const caFile = put('ca.crt', ca.cert);
    const etcdServer = await issue('etcd', [BRIDGE]);
    // Patroni reaches etcd through its JSON gateway, which refuses a client
    // certificate with a CN once etcd's auth is on ("CommonName of client
    // sending a request against gateway will be ignored"): the service's
    // certificate only opens TLS, without a CN, and its user logs in with
    // its password.
    const etcdClientReq = await makeKeyAndRequest('ignored');
    const etcdClient: KeyPair = {
      cert: await signRequest(ca, etcdClientReq.csr, { cn: null, names: [], days: 2, use: 'client' }), // prettier-ignore
      key: etcdClientReq.key,
    };
    const basin = await issue('basin', []);
    const basinTls: ClientTls = { ca: ca.cert, cert: basin.cert, key: basin.key };

    // One etcd member, clients over TLS with certificates of the CA.
    const etcdPort = await freePort();
    const peerPort = await freePort();
    const etcdData = join(DIR, 'etcd');
    const etcdLog = openSync(join(DIR, 'etcd.log'), 'a');
    const etcd: ChildProcess = spawn(
      'etcd',
      ['--name', 'ptn', '--data-dir', etcdData,
        '--listen-client-urls', `https://${BRIDGE}:${etcdPort}`,
        '--advertise-client-urls', `https://${BRIDGE}:${etcdPort}`,
        '--listen-peer-urls', `http://127.0.0.1:${peerPort}`,
        '--initial-advertise-peer-urls', `http://127.0.0.1:${peerPort}`,
        '--initial-cluster', `ptn=http://127.0.0.1:${peerPort}`,
        '--cert-file', put('etcd.crt', etcdServer.cert), '--key-file', put('etcd.key', etcdServer.key, { name: 'root', uid: 0, gid: 0 }),
        '--trusted-ca-file', caFile, '--client-cert-auth'], // prettier-ignore
      { stdio: ['ignore', etcdLog, etcdLog] },
    );
    writeFileSync(join(DIR, 'etcd.pid'), String(etcd.pid));
    t.after(() => etcd.kill('SIGKILL'));

    // etcd's RBAC, as the etcd members' work sets it up: the service's
    // user may read and write its own prefix only.
    const etcdRoot = await issue('root', []);
    const rootCert = put('etcd-root.crt', etcdRoot.cert);
    const rootKey = put('etcd-root.key', etcdRoot.key, { name: 'root', uid: 0, gid: 0 });
    const etcdctl = (auth: string | undefined, ...args: string[]) =>
      execFileSync(
        'etcdctl',
        [`--endpoints=https://${BRIDGE}:${etcdPort}`, `--cacert=${caFile}`,
          `--cert=${rootCert}`, `--key=${rootKey}`, ...(auth ? [`--user=${auth}`] : []), ...args], // prettier-ignore
        { env: { ...process.env, ETCDCTL_API: '3' }, encoding: 'utf8', stdio: 'pipe' },
      );
    await until(
      'etcd answering',
      async () => etcdctl(undefined, 'endpoint', 'health'),
      () => true,
      () => tail(join(DIR, 'etcd.log')),
    );
    const etcdPassword = 'etcd-secret-of-the-test';
    etcdctl(undefined, 'user', 'add', 'root:root-secret-of-the-test');
    etcdctl(undefined, 'user', 'grant-role', 'root', 'root');
    etcdctl(undefined, 'role', 'add', SERVICE);
    etcdctl(
      undefined,
      'role',
      'grant-permission',
      SERVICE,
      '--prefix=true',
      'readwrite',
      `/basin/${SERVICE}/`,
    );
    etcdctl(undefined, 'user', 'add', `${SERVICE}:${etcdPassword}`);
    etcdctl(undefined, 'user', 'grant-role', SERVICE, SERVICE);
    etcdctl(undefined, 'auth', 'enable');
    const asService = `${SERVICE}:${etcdPassword}`;
    etcdctl(asService, 'put', `/basin/${SERVICE}/probe`, 'x');
    assert.throws(
      () => etcdctl(asService, 'put', '/basin/another/probe', 'x'),
      /permission denied/,
    );
    assert.throws(
      () => etcdctl(asService, 'get', '/basin/another/', '--prefix'),
      /permission denied/,
    );

    // Basin's template, built as the driver builds it.
    const layout = new Layout(join(DIR, 'basin'));
    mkdirSync(layout.socketsDir, { recursive: true, mode: 0o711 });
    for (const d of [layout.dataDir, layout.root, layout.socketsDir]) chmodSync(d, 0o711);
    const privateTmp = await detectPrivateTmp('auto', { sizeMb: 16, keep: DIR }, silentLogger);
    const install = pgInstall();
    await new Template({
      layout,
      pg: install,
      user: resolveOsUser('postgres'),
      adminOsUsers: ['root', USER],
      privateTmp,
      log: silentLogger,
    }).ensure();

    const members: PatroniMember[] = [0, 1, 2].map((i) => ({
      index: i,
      address: address(i),
      port: 5433,
      apiPort: API_PORT,
    }));
    const nodes: Node[] = [];
    for (const m of members) {
      const files = patroniFiles(join(DIR, `n${m.index}`));
      await ensurePatroniDirs(files, svc);
      await prepareSeed(files, layout.templatePgdata, svc);
      const socketDir = join(files.data, 'sock');
      mkdirSync(socketDir, { mode: 0o700 });
      chownSync(socketDir, svc.uid, svc.gid);
      const server = await issue(`node${m.index}`, [m.address]);
      const inputs: PatroniInputs = {
        spec,
        self: m,
        members,
        paths: {
          socketDir,
          // Archiving goes to the repository host (issue 21), not part of this test.
          pgbackrest: '/bin/true',
          backupConf: '/nonexistent',
          forkSourceConf: '/nonexistent',
          forkSourcePg: '/nonexistent',
          pgdata: files.pgdata,
          pgBin: install.bin,
          seed: files.seed,
          pgpass: files.pgpass,
          serverTls: {
            cert: put(`node${m.index}.crt`, server.cert),
            key: put(`node${m.index}.key`, server.key, svc),
            ca: caFile,
          },
        },
        conf: { publicCidrs: ['0.0.0.0/0'] },
        adminOsUsers: ['root', USER],
        etcd: {
          endpoints: [`${BRIDGE}:${etcdPort}`],
          tls: {
            cert: put('etcd-client.crt', etcdClient.cert),
            key: put('etcd-client.key', etcdClient.key, svc),
            ca: caFile,
          },
          auth: { username: SERVICE, password: etcdPassword },
        },
        restApi: {
          tls: {
            cert: put(`node${m.index}.crt`, server.cert),
            key: put(`node${m.index}.key`, server.key, svc),
            ca: caFile,
          },
          password: 'api-secret-of-the-test',
          allowlist: [BRIDGE],
        },
        replicationSecret: 'replication-secret-of-the-test',
        // As across hosts (faster than Patroni's defaults, 30/10/10).
        timing: PATRONI_TIMING,
      };
      await writeRootFile(files.config, renderPatroniConfig(inputs), svc);
      nodes.push({
        index: m.index,
        files,
        user: { ...svc, netns: `/run/netns/${PREFIX}-h${m.index + 1}` },
        url: `https://${m.address}:${API_PORT}`,
        admin: { socketDir, port: 5433, pgdata: files.pgdata },
      });
    }
    t.after(async () => {
      for (const n of nodes) await stopPatroni(n.files, n.user, 10_000).catch(() => undefined);
    });
    const logs = () =>
      nodes.map((n) => `--- node${n.index}\n${tail(n.files.log)}`).join('\n') +
      `\n--- etcd\n${tail(join(DIR, 'etcd.log'))}`;

    for (const n of nodes) await startPatroni({ files: n.files, user: n.user, privateTmp });

    // A leader is elected (from the template's clone: no initdb ran), and
    // both standbys stream, one of them synchronous.
    const view = (n: Node) => clusterState(n.url, basinTls);
    let state = await until(
      'a leader with a synchronous standby and a streaming replica',
      () => view(nodes[0] as Node),
      (s) =>
        s.leader !== undefined &&
        s.members.length === 3 &&
        s.members.filter((m) => m.role === 'sync_standby').length === 1 &&
        s.members.every((m) => ['running', 'streaming'].includes(m.state)),
      logs,
    );
    const leader = byName(nodes, state.leader as string);
    assert.equal(await isPrimary(leader.url, basinTls), true);

    // Each Patroni, and the PostgreSQL it started, runs as the service's
    // user, with no_new_privs, in its host's network namespace and a
    // mount namespace of its own; a second start adopts the running one.
    for (const n of nodes) {
      const st = await patroniStatus(n.files, n.user);
      assert.ok(st.up, `node${n.index}'s Patroni runs`);
      const again = await startPatroni({ files: n.files, user: n.user, privateTmp });
      assert.deepEqual([again.adopted, again.pid], [true, st.pid]);
      const server = await postmasterStatus(n.files.pgdata);
      assert.ok(server.up);
      for (const pid of [st.pid, server.pid]) {
        assert.equal(
          readFileSync(`/proc/${pid}/status`, 'utf8').match(/^Uid:\s+(\d+)/m)?.[1],
          String(svc.uid),
        );
        const netns = statSync(n.user.netns as string).ino;
        assert.equal(readlinkSync(`/proc/${pid}/ns/net`), `net:[${netns}]`);
        assert.equal(await isConfined(pid, privateTmp !== undefined), true);
      }
    }

    // The REST API answers only a client with a certificate of the CA;
    // its unsafe endpoints ask for Basin's password besides.
    await assert.rejects(apiGet(leader.url, '/cluster', { ...basinTls, cert: '', key: '' }));
    const stranger = await makeCa('a stranger');
    const strangerReq = await makeKeyAndRequest('basin');
    const strangerCert = await signRequest(stranger, strangerReq.csr, {
      cn: 'basin',
      names: [],
      days: 1,
    });
    await assert.rejects(
      apiGet(leader.url, '/cluster', { ca: ca.cert, cert: strangerCert, key: strangerReq.key }),
    );
    assert.equal((await apiRequest(leader.url, 'POST', '/restart', basinTls)).status, 401);
    for (const n of nodes.filter((x) => x !== leader)) {
      assert.equal(await isPrimary(n.url, basinTls), false);
    }
    const timeline = state.members.find((m) => m.name === state.leader)?.timeline;
    assert.equal(typeof timeline, 'number');

    // Streaming over TLS from each standby's own address, and writes wait for the synchronous one.
    const rows = await withAdmin(leader.admin, 'postgres', async (c) => {
      const r = await c.query<{ name: string; addr: string; ssl: boolean; sync: string }>(
        `SELECT r.application_name AS name, host(r.client_addr) AS addr, s.ssl, r.sync_state AS sync
           FROM pg_stat_replication r JOIN pg_stat_ssl s ON s.pid = r.pid ORDER BY 1`,
      );
      return r.rows;
    });
    assert.deepEqual(
      rows.map((r) => [r.name, r.addr, r.ssl]),
      nodes.filter((n) => n !== leader).map((n) => [`node${n.index}`, address(n.index), true]),
    );
    const syncName = state.members.find((m) => m.role === 'sync_standby')?.name as string;
    assert.equal(rows.find((r) => r.name === syncName)?.sync, 'sync');

    // A client's role (Basin's own sessions commit locally: admin.ts).
    await withAdmin(leader.admin, 'postgres', async (c) => {
      await c.query('CREATE TABLE acked (id int PRIMARY KEY)');
      await c.query('INSERT INTO acked SELECT generate_series(1, 100)');
      await c.query(`CREATE ROLE writer LOGIN PASSWORD 'writer-secret'`);
      await c.query('GRANT INSERT, SELECT ON acked TO writer');
    });
    const standby = byName(nodes, syncName);
    const other = nodes.find((n) => n !== leader && n !== standby) as Node;
    for (const n of [standby, other]) {
      const count = await until(
        `the rows on node${n.index}`,
        () => countRows(n.admin),
        (c) => c === 100,
        logs,
      );
      assert.equal(count, 100);
    }

    // A writer commits one row at a time on the primary; each commit it
    // saw acknowledged is recorded. Then the primary's Patroni and
    // PostgreSQL are killed with SIGKILL, mid-stream.
    const acked: number[] = [];
    let writing = true;
    // A client of the primary's address over TLS (verify-full), with the
    // service's default synchronous_commit: a commit is acknowledged once
    // the synchronous standby has it.
    const writer = (async () => {
      let id = 1000;
      while (writing) {
        const c = new pg.Client({
          host: address(leader.index),
          port: 5433,
          user: 'writer',
          password: 'writer-secret',
          database: 'postgres',
          ssl: { ca: ca.cert },
          connectionTimeoutMillis: 2000,
        });
        c.on('error', () => undefined);
        try {
          await c.connect();
          while (writing) {
            await c.query(`INSERT INTO acked VALUES (${id})`);
            acked.push(id);
            id++;
          }
        } catch {
          await sleep(100);
        } finally {
          await c.end().catch(() => undefined);
        }
      }
    })();
    await until(
      'acknowledged commits',
      async () => acked.length,
      (n) => n >= 50,
      logs,
    );
    const st = await patroniStatus(leader.files, leader.user);
    assert.ok(st.up);
    signalAll([st.pid, ...(await clusterProcesses(leader.files.pgdata))], 'SIGKILL');
    await sleep(1000);
    writing = false;
    await writer;
    assert.deepEqual(await clusterProcesses(leader.files.pgdata), []);

    // The synchronous standby is promoted (the only one that may be, in
    // strict mode), on a new timeline, with every acknowledged commit.
    state = await until(
      'a new leader',
      () => view(standby),
      (s) => s.leader !== undefined && s.leader !== `node${leader.index}`,
      logs,
    );
    assert.equal(state.leader, syncName);
    await until(
      'the new primary accepting writes',
      () => isPrimary(standby.url, basinTls),
      (p) => p,
      logs,
    );
    const have = await withAdmin(standby.admin, 'postgres', async (c) => {
      const r = await c.query<{ id: number }>('SELECT id FROM acked WHERE id >= 1000');
      return new Set(r.rows.map((x) => x.id));
    });
    const lost = acked.filter((id) => !have.has(id));
    assert.deepEqual(lost, [], `acknowledged commits lost in the failover (${acked.length} acked)`);
    // Patroni answers /primary as soon as it promotes; PostgreSQL leaves
    // recovery a moment later: the write is tried until it is accepted.
    await until(
      'a write on the new primary',
      () =>
        withAdmin(standby.admin, 'postgres', (c) =>
          c.query('INSERT INTO acked SELECT generate_series(100001, 100010)'),
        ),
      () => true,
      logs,
    );

    // The old primary, started again, rejoins as a standby of the new one
    // (pg_rewind), has what was written since, and refuses a write.
    await startPatroni({ files: leader.files, user: leader.user, privateTmp });
    state = await until(
      `node${leader.index} streaming from the new primary`,
      () => view(standby),
      (s) => {
        const old = s.members.find((m) => m.name === `node${leader.index}`);
        const now = s.members.find((m) => m.name === s.leader);
        return (
          old !== undefined &&
          old.role !== 'leader' &&
          ['running', 'streaming'].includes(old.state) &&
          old.timeline !== undefined &&
          old.timeline === now?.timeline
        );
      },
      logs,
    );
    assert.equal(state.leader, syncName);
    assert.ok(
      (state.members.find((m) => m.name === syncName)?.timeline ?? 0) > (timeline as number),
    );
    const count = await until(
      'the rows written after the failover on the old primary',
      () => countRows(leader.admin),
      (c) => c === 100 + acked.length + 10 || c > 100 + acked.length + 10,
      logs,
    );
    assert.ok(count >= 100 + acked.length + 10);
    await assert.rejects(
      withAdmin(leader.admin, 'postgres', (c) => c.query('INSERT INTO acked VALUES (-1)')),
      /read-only transaction/,
    );
    assert.equal(await isPrimary(leader.url, basinTls), false);
    const oldLog = readFileSync(leader.files.log, 'utf8');
    for (const line of oldLog.split('\n').filter((l) => /rewind|basebackup|bootstrap/i.test(l))) {
      t.diagnostic(`node${leader.index}: ${line}`);
    }
    t.diagnostic(`${acked.length} commits acknowledged before the kill, none lost`);
    assert.match(oldLog, /running pg_rewind from node\d/);

    // Stopped: Patroni gives up its part and stops its PostgreSQL; nothing of either is left.
    for (const n of nodes) {
      await stopPatroni(n.files, n.user);
      assert.deepEqual(await patroniStatus(n.files, n.user), { up: false });
      assert.deepEqual(await clusterProcesses(n.files.pgdata), []);
    }
  },
);

function byName(nodes: Node[], name: string): Node {
  const n = nodes.find((x) => `node${x.index}` === name);
  assert.ok(n, `no node named ${name}`);
  return n;
}

async function countRows(target: AdminTarget): Promise<number> {
  return withAdmin(target, 'postgres', async (c) => {
    const r = await c.query<{ n: string }>('SELECT count(*) AS n FROM acked');
    return Number(r.rows[0]?.n ?? 0);
  });
}

function tail(file: string): string {
  try {
    return readFileSync(file, 'utf8').split('\n').slice(-30).join('\n');
  } catch {
    return '(none)';
  }
}

/** Polls `get` until `ok` holds (errors count as not yet), for up to three minutes. */
async function until<T>(
  what: string,
  get: () => Promise<T>,
  ok: (v: T) => boolean,
  logs: () => string,
): Promise<T> {
  const deadline = Date.now() + 180_000;
  let last: unknown;
  for (;;) {
    try {
      const v = await get();
      if (ok(v)) return v;
      last = v;
    } catch (err) {
      last = (err as Error).message;
    }
    if (Date.now() > deadline) {
      assert.fail(`${what}: not reached; last ${JSON.stringify(last)}\n${logs()}`);
    }
    await sleep(250);
  }
}
