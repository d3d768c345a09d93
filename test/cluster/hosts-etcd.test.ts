// etcd on the hosts (docs/decisions.md, "etcd on the hosts"), on the
// namespace topology (topology.sh): three `basin host run` agents join a
// control plane on a PostgreSQL store; the control plane bootstraps a member
// on each, over TLS both ways, and turns RBAC on. A write through one member
// is read through another; a service's identity reaches only its own prefix;
// a client without a certificate of the installation is refused; a member
// killed is restarted, an agent killed leaves its member running and the
// next agent adopts it; a whole host killed leaves a cluster that writes.

import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { type AgentIdentity, readIdentity } from '../../src/agent/agent-files.js';
import { PatroniNodeRefused, patroniNodeSecrets } from '../../src/agent/patroni-node.js';
import type { PatroniSecrets } from '../../src/drivers/local/patroni/patroni-node.js';
import { grantServiceEtcd, revokeServiceEtcd } from '../../src/hosts/etcd-service-identity.js';
import { etcdRootIdentity, etcdMembersCa } from '../../src/hosts/etcd-ca.js';
import { certCn, makeCa, makeKeyAndRequest, signRequest } from '../../src/lib/x509.js';
import { openPostgresStore } from '../../src/store/postgres/pg-store.js';
import { type Agent, cluster, until } from './cluster.js';

const execFileP = promisify(execFile);
const PREFIX = 'betc';
/** The topology's subnet, 10.231.5.0/24: its own, as the tests run in parallel. */
const NET = 5;
const endpoint = (i: number) => `https://10.231.${NET}.${10 + i}:2379`;

interface EtcdView {
  formed: boolean;
  quorum: boolean;
  members: { host: string | null; started: boolean; healthy: boolean; leader: boolean }[];
}

test(
  'etcd members on three hosts form one cluster over TLS with RBAC, survive a member, an agent and a host killed',
  { timeout: 600_000 },
  async (t) => {
    const c = await cluster(t, { prefix: PREFIX, net: NET, hosts: 3, driver: 'sim' });
    const { b, cli, address } = c;
    const scratch = mkdtempSync(join(tmpdir(), 'basin-etcd-'));
    t.after(() => rmSync(scratch, { recursive: true, force: true }));
    const etcd = async () => JSON.parse(await cli('host', 'etcd', '--json')) as EtcdView;
    const store = await openPostgresStore(c.url);
    t.after(() => store.close());
    const zone = (i: number) => (i === 3 ? 'b' : 'a');
    for (const i of [1, 2, 3]) await c.joinAgent(i, { zone: zone(i) });

    // The three members come up and form one cluster, with one leader.
    await until(async () => {
      const e = await etcd();
      return e.quorum && e.members.length === 3 && e.members.every((m) => m.healthy);
    }, 240_000);
    const formed = await etcd();
    assert.deepEqual(formed.members.map((m) => m.host).sort(), ['h1', 'h2', 'h3']);
    assert.equal(formed.members.filter((m) => m.leader).length, 1);
    const listed = JSON.parse(await cli('host', 'list', '--json')) as {
      name: string;
      etcd: { healthy: boolean } | null;
    }[];
    assert.ok(
      listed.every((h) => h.etcd?.healthy === true),
      JSON.stringify(listed),
    );

    // Each runs as a uid of its host's range (not root, not a tenant's), its data private.
    const pidOf = (i: number) =>
      Number(readFileSync(join(c.host(i).dataDir, 'etcd', 'etcd.pid'), 'utf8'));
    for (const i of [1, 2, 3]) {
      const h = c.host(i);
      const uid = statSync(`/proc/${pidOf(i)}`).uid;
      assert.ok(uid >= h.serviceUids.min && uid <= h.serviceUids.max, `uid ${uid}`);
      const data = statSync(join(h.dataDir, 'etcd', 'data'));
      assert.equal(data.mode & 0o777, 0o700);
      assert.equal(data.uid, uid);
    }

    // Clients: files for etcdctl, as root (the control plane) and as services.
    const files = (name: string, pair: { cert: string; key: string }, ca: string) => {
      const dir = join(scratch, name);
      execFileSync('mkdir', ['-p', dir]);
      writeFileSync(join(dir, 'c.crt'), pair.cert);
      writeFileSync(join(dir, 'c.key'), pair.key, { mode: 0o600 });
      writeFileSync(join(dir, 'ca.crt'), ca);
      return [
        `--cacert=${join(dir, 'ca.crt')}`,
        `--cert=${join(dir, 'c.crt')}`,
        `--key=${join(dir, 'c.key')}`,
      ];
    };
    const ctl = async (who: string[], endpoints: number[], ...args: string[]) => {
      try {
        const r = await execFileP(
          'etcdctl',
          [`--endpoints=${endpoints.map(endpoint).join(',')}`, '--dial-timeout=3s', '--command-timeout=10s', ...who, ...args],
          { env: { ETCDCTL_API: '3', PATH: process.env.PATH } },
        ); // prettier-ignore
        return { ok: true, out: r.stdout, err: r.stderr };
      } catch (err) {
        const e = err as { stdout?: string; stderr?: string };
        return { ok: false, out: e.stdout ?? '', err: e.stderr ?? '' };
      }
    };
    const membersCa = (await etcdMembersCa(store)).cert;
    const root = files('root', await etcdRootIdentity(store), membersCa);
    // A service's identity: its user with a password, and a client
    // certificate with no CN that only opens TLS (etcd's JSON gateway,
    // which Patroni speaks, refuses one with a CN once auth is on).
    const certOnly: Record<string, string[]> = {};
    const gateway: Record<string, (path: string, body: object, token?: string) => Promise<string>> = {}; // prettier-ignore
    const service = async (id: string) => {
      const { key, csr } = await makeKeyAndRequest('root'); // the name asked for is not the one given
      const granted = await grantServiceEtcd(store, id, csr);
      assert.deepEqual([...granted.endpoints].sort(), [endpoint(1), endpoint(2), endpoint(3)]);
      assert.equal(granted.username, `basin-service-${id}`);
      assert.equal(certCn(granted.certificate), undefined);
      // Granted again: the same password, still valid (a grant converges).
      const again = await grantServiceEtcd(store, id, (await makeKeyAndRequest('x')).csr);
      assert.equal(again.password, granted.password);
      const tlsArgs = files(id, { cert: granted.certificate, key }, granted.ca);
      certOnly[id] = tlsArgs;
      gateway[id] = async (path, body, token) => {
        const dir = join(scratch, id);
        const r = await execFileP('curl', ['-sS', '--max-time', '10', '--cacert', join(dir, 'ca.crt'),
          '--cert', join(dir, 'c.crt'), '--key', join(dir, 'c.key'),
          ...(token ? ['-H', `Authorization: ${token}`] : []),
          '-d', JSON.stringify(body), `${endpoint(1)}${path}`]); // prettier-ignore
        return r.stdout;
      };
      return [...tlsArgs, `--user=${granted.username}:${granted.password}`];
    };
    const alpha = await service('alpha00001');
    const beta = await service('beta000001');
    const b64 = (text: string) => Buffer.from(text).toString('base64');

    // A write through one member is read through another.
    const put = await ctl(alpha, [1], 'put', '/basin/alpha00001/leader', 'node-1');
    assert.ok(put.ok, put.err);
    const got = await ctl(alpha, [2], 'get', '/basin/alpha00001/leader', '--print-value-only');
    assert.ok(got.ok, got.err);
    assert.equal(got.out.trim(), 'node-1');

    // A service's identity reaches only its own prefix.
    assert.ok((await ctl(beta, [3], 'put', '/basin/beta000001/leader', 'b-1')).ok);
    for (const args of [
      ['get', '/basin/beta000001/leader'],
      ['get', '/basin/', '--prefix'],
      ['put', '/basin/beta000001/leader', 'stolen'],
      ['del', '/basin/beta000001/leader'],
      ['get', '/basin/alpha00001', '--prefix'], // a sibling's name with this one's as its start
      ['put', '/basin/alpha000010/x', 'y'],
      ['user', 'list'],
    ]) {
      const r = await ctl(alpha, [1], ...args);
      assert.equal(r.ok, false, `alpha may not ${args.join(' ')}: ${r.out}`);
      assert.match(r.err, /permission denied|not granted|user name is empty|role/i, r.err);
    }
    // The certificate alone is no user: it opens TLS and nothing else.
    const anonymous = await ctl(certOnly['alpha00001'] as string[], [1], 'get', '/basin/alpha00001/leader'); // prettier-ignore
    assert.equal(anonymous.ok, false, anonymous.out);
    // Patroni's way in, the JSON gateway: the password gives a token that
    // reads the service's own keys, and not another's.
    const asPatroni = gateway['alpha00001'] as (typeof gateway)[string];
    const auth = JSON.parse(
      await asPatroni('/v3/auth/authenticate', {
        name: 'basin-service-alpha00001',
        password: alpha.at(-1)?.split(':')[1],
      }),
    ) as { token?: string };
    assert.ok(auth.token, JSON.stringify(auth));
    const own = await asPatroni(
      '/v3/kv/range',
      { key: b64('/basin/alpha00001/leader') },
      auth.token,
    );
    assert.ok(own.includes(b64('node-1')), own);
    const theirs = await asPatroni('/v3/kv/range', { key: b64('/basin/beta000001/leader') }, auth.token); // prettier-ignore
    assert.match(theirs, /permission denied/, theirs);
    assert.doesNotMatch(theirs, new RegExp(b64('b-1')));
    const wrong = await asPatroni('/v3/auth/authenticate', { name: 'basin-service-alpha00001', password: 'guess' }); // prettier-ignore
    assert.match(wrong, /authentication failed/, wrong);
    // A grant repeated keeps the password, and so the token Patroni holds.
    await grantServiceEtcd(store, 'alpha00001', (await makeKeyAndRequest('x')).csr);
    const kept = await asPatroni('/v3/kv/range', { key: b64('/basin/alpha00001/leader') }, auth.token); // prettier-ignore
    assert.ok(kept.includes(b64('node-1')), kept);
    // A password changed behind Basin's back is set again by the next grant.
    execFileSync('etcdctl', [`--endpoints=${endpoint(1)}`, ...root, 'user', 'passwd', 'basin-service-alpha00001', '--interactive=false'], { input: 'changed\n', env: { ETCDCTL_API: '3', PATH: process.env.PATH }, stdio: ['pipe', 'ignore', 'pipe'] }); // prettier-ignore
    assert.equal((await ctl(alpha, [1], 'get', '/basin/alpha00001/leader')).ok, false);
    await grantServiceEtcd(store, 'alpha00001', (await makeKeyAndRequest('x')).csr);
    const regranted = await ctl(
      alpha,
      [1],
      'get',
      '/basin/alpha00001/leader',
      '--print-value-only',
    );
    assert.equal(regranted.out.trim(), 'node-1', regranted.err);
    // A host asks for what a node's Patroni needs of a service it runs a
    // node of (over its mutual TLS; a standby's host as well as node 0's):
    // the etcd identity works; a host with no node of the service is refused.
    const hostIdentity = (i: number) => readIdentity(c.host(i).dataDir) as AgentIdentity;
    await store.transaction(async (tx) => {
      const held = { cpuMillis: 0, memoryMb: 256 };
      await tx.placements.put({ resourceId: 'alpha00001', hostId: hostIdentity(1).hostId, ...held }); // prettier-ignore
      await tx.placements.put({ resourceId: 'alpha00001:node1', hostId: hostIdentity(2).hostId, ...held }); // prettier-ignore
    });
    const given = [];
    for (const i of [1, 2]) {
      const node = await patroniNodeSecrets(hostIdentity(i), 'alpha00001');
      given.push(node);
      assert.equal(certCn(node.etcd.cert), undefined);
      const viaHost = [
        ...files(`alpha-h${i}`, { cert: node.etcd.cert, key: node.etcd.key }, node.etcd.ca),
        `--user=${node.etcd.username}:${node.etcd.password}`,
      ];
      const r = await ctl(viaHost, [i], 'get', '/basin/alpha00001/leader', '--print-value-only');
      assert.equal(r.out.trim(), 'node-1', r.err);
    }
    // Every node of a service is given the same passwords, one per purpose.
    const [n1, n2] = given as [PatroniSecrets, PatroniSecrets];
    assert.equal(n1.replicationPassword, n2.replicationPassword);
    assert.equal(n1.restApiPassword, n2.restApiPassword);
    assert.equal(new Set([n1.etcd.password, n1.replicationPassword, n1.restApiPassword]).size, 3);
    assert.ok(n1.replicationPassword.length >= 40);
    await assert.rejects(
      patroniNodeSecrets(hostIdentity(3), 'alpha00001'),
      (err: PatroniNodeRefused) => err.status === 403 && /placed on host h3/.test(err.message),
    );
    await assert.rejects(
      patroniNodeSecrets(hostIdentity(1), 'beta000001'),
      (err: PatroniNodeRefused) => err.status === 403,
    );
    await store.transaction(async (tx) => {
      await tx.placements.remove('alpha00001');
      await tx.placements.remove('alpha00001:node1');
    });
    const still = await ctl(root, [2], 'get', '/basin/beta000001/leader', '--print-value-only');
    assert.equal(still.out.trim(), 'b-1');

    // A service revoked: its password logs in as no one, and its keys are gone.
    await revokeServiceEtcd(store, 'beta000001');
    const revoked = await ctl(beta, [1], 'put', '/basin/beta000001/leader', 'b-2');
    assert.equal(revoked.ok, false);
    const left = await ctl(root, [1], 'get', '/basin/beta000001/', '--prefix', '--keys-only');
    assert.equal(left.out.trim(), '');

    // A client without a certificate of the installation is refused: none at all, or one of another CA.
    const none = await ctl(
      [`--cacert=${join(scratch, 'root', 'ca.crt')}`],
      [1],
      'get',
      '/basin/',
      '--prefix',
    );
    assert.equal(none.ok, false);
    const otherCa = await makeCa('not the installation');
    const { key: ok, csr: oc } = await makeKeyAndRequest('root');
    const forged = files('forged', { cert: await signRequest(otherCa, oc, { cn: 'root', names: [], days: 1 }), key: ok }, membersCa); // prettier-ignore
    const refused = await ctl(forged, [1], 'get', '/basin/', '--prefix');
    assert.equal(refused.ok, false);
    assert.doesNotMatch(refused.out, /b-1|node-1/);
    // The peer port takes a member's certificate from its host (its /members
    // answers), not a client's: both asked from host 2, as a member would.
    const memberTls = join(c.host(2).dataDir, 'etcd', 'tls');
    const fromHost2 = (cert: string, key: string) =>
      execFileP('ip', ['netns', 'exec', `${PREFIX}-h2`, 'curl', '-sS', '--http1.1', '--max-time', '10',
        '--cacert', join(memberTls, 'members-ca.crt'), '--cert', cert, '--key', key,
        `https://${address(1)}:2380/members`]); // prettier-ignore
    const asMember = await fromHost2(join(memberTls, 'member.crt'), join(memberTls, 'member.key'));
    assert.match(asMember.stdout, new RegExp(`"peerURLs":\\["https://${address(2)}:2380"\\]`));
    await assert.rejects(
      fromHost2(join(scratch, 'alpha00001', 'c.crt'), join(scratch, 'alpha00001', 'c.key')),
    );

    // A member killed is started again by its agent.
    const before = pidOf(1);
    process.kill(before, 'SIGKILL');
    await until(async () => {
      const e = await etcd();
      return pidOf(1) !== before && e.members.every((m) => m.healthy);
    }, 180_000);

    // An agent killed with kill -9 leaves its member running; the next one adopts it.
    const member2 = pidOf(2);
    (c.agents[1] as Agent).child.kill('SIGKILL');
    await sleep(1000);
    assert.doesNotThrow(() => process.kill(member2, 0));
    const again = c.runAgent(2, { zone: zone(2) });
    await until(async () => /host agent at/.test(again.output()), 120_000);
    await sleep(3000); // ten heartbeats: each would start etcd if it thought none ran
    assert.equal(pidOf(2), member2);
    assert.doesNotMatch(again.output(), /not running; starting it/);
    assert.ok((await etcd()).members.every((m) => m.healthy));

    // A whole host killed (every process in its namespace): the others keep a quorum and accept writes.
    execFileSync('bash', ['-c', `kill -9 $(ip netns pids ${PREFIX}-h3) 2>/dev/null || true`]);
    // (If h3 led, the first writes wait out an election: retried until one is accepted.)
    let after = await ctl(alpha, [1, 2], 'put', '/basin/alpha00001/leader', 'node-2');
    await until(async () => {
      if (!after.ok) after = await ctl(alpha, [1, 2], 'put', '/basin/alpha00001/leader', 'node-2');
      return after.ok;
    }, 60_000);
    assert.ok(after.ok, after.err);
    const read = await ctl(root, [2], 'get', '/basin/alpha00001/leader', '--print-value-only');
    assert.equal(read.out.trim(), 'node-2');
    await until(async () => {
      const e = await etcd();
      return e.quorum && e.members.filter((m) => m.healthy).length === 2;
    }, 180_000);

    assert.equal((await b.stop()).code, 0);
  },
);
