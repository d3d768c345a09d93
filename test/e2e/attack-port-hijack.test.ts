// Issue 18, item 2, "another tenant's password through its port", as the
// attacker would try it against Basin as shipped (`node dist/main.js`,
// default settings but for the blocks the harness gives each installation):
// tenant B's services are paused; tenant A, with only its credential and
// its tsdbadmin's COPY … PROGRAM, runs a fake PostgreSQL server on B's
// endpoint port, B's pooler port and B's HA nodes' ports (what B's HAProxy
// frontend forwards to). The fake speaks TLS with A's own certificate
// (issued by the installation's CA, for localhost, as every service's is)
// and asks for a cleartext password, writing what it gets to a file A
// reads back. B's clients, with B's password, connect to B's endpoints:
// with verify-full and channel_binding=require, as Basin now prints, and
// with bare sslmode=require too. No password reaches A: each service runs
// in a network namespace of its own, and B's ports lead into B's, whatever
// state B is in. B's start succeeds while A still listens, and B answers;
// B's namespace's own address is not reached from A's.
// Then A binds every port of the installation's range, and another
// service's create still works: a tenant's ports are its namespace's own.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { Layout } from '../../src/drivers/local/layout.js';
import { namespaceName } from '../../src/drivers/local/network/addresses.js';
import { installation } from './basin-process.js';
import { conninfo, psql, psqlRefused } from './clients.js';
import { runningNodes } from './ha-nodes.js';
import { bootstrapTenant, newTenant, TenantApi, type TenantShell, tenantShell } from './tenants.js';

/**
 * The fake server (Python, run by A as A's OS user): listens on every
 * port given, answers an SSLRequest with TLS under A's own certificate (in
 * its data directory, the program's working directory), asks for a
 * cleartext password (AuthenticationCleartextPassword), and logs each
 * connection and each password it gets, or why it got none.
 */
const FAKE_SERVER = `
import os, socket, ssl, struct, sys, threading
log_path, ports = sys.argv[1], [int(p) for p in sys.argv[2:]]
lock = threading.Lock()
def log(line):
    with lock, open(log_path, 'a') as f:
        f.write(line + '\\n')
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(os.path.join(os.getcwd(), 'server.crt'), os.path.join(os.getcwd(), 'server.key'))
def recv(c, n):
    b = b''
    while len(b) < n:
        chunk = c.recv(n - len(b))
        if not chunk:
            raise EOFError('the client left')
        b += chunk
    return b
def handle(c, peer, port):
    log('connection on %d from %s' % (port, peer[0]))
    try:
        n, code = struct.unpack('!ii', recv(c, 8))
        if code == 80877103:
            c.sendall(b'S')
            c = ctx.wrap_socket(c, server_side=True)
            n, code = struct.unpack('!ii', recv(c, 8))
        recv(c, n - 8)
        c.sendall(b'R' + struct.pack('!ii', 8, 3))
        recv(c, 1)
        (n,) = struct.unpack('!i', recv(c, 4))
        password = recv(c, n - 4).rstrip(b'\\0').decode()
        log('password on %d: %s' % (port, password))
    except Exception as e:
        log('no password on %d: %s' % (port, e))
    finally:
        c.close()
def serve(s, port):
    while True:
        c, peer = s.accept()
        threading.Thread(target=handle, args=(c, peer, port), daemon=True).start()
for port in ports:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(('0.0.0.0', port))
        s.listen(64)
    except OSError as e:
        log('cannot bind %d: %s' % (port, e))
        continue
    log('bound %d' % port)
    threading.Thread(target=serve, args=(s, port)).start()
log('ready')
`;

/** Starts the fake server in A's service on `ports`, logging to `log`; resolves once it has tried them all. */
async function startFake(a: TenantShell, log: string, ports: number[]): Promise<string[]> {
  const script = Buffer.from(FAKE_SERVER).toString('base64');
  await a.feed(`echo ${script} | base64 -d > /tmp/fake.py`);
  await a.feed(`setsid nohup python3 /tmp/fake.py ${log} ${ports.join(' ')} >/dev/null 2>&1 &`);
  for (let i = 0; i < 200; i++) {
    const lines = await a.run(`cat ${log} 2>/dev/null || true`);
    if (lines.includes('ready')) return lines;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(
    `the fake server did not start: ${(await a.run(`cat ${log} || true`)).join('\n')}`,
  );
}

/** The address of `id`'s network namespace (its eth0), as the kernel has it. */
function namespaceAddress(layout: Layout, id: string): string {
  const tag = readFileSync(layout.installationFile, 'utf8').trim();
  const shown = JSON.parse(
    execFileSync('ip', ['-n', namespaceName(tag, id), '-j', '-4', 'addr', 'show', 'dev', 'eth0'], {
      encoding: 'utf8',
    }),
  ) as { addr_info: { local: string }[] }[];
  const address = shown[0]?.addr_info[0]?.local;
  assert.ok(address, `no address in ${id}'s namespace`);
  return address;
}

test(
  "a tenant cannot receive connections meant for another service, nor take the installation's ports",
  { timeout: 900_000 },
  async (t) => {
    const inst = await installation(t);
    const b = await inst.start();
    // Log lines are buffered (written within a second): wait for the driver's.
    await b.waitFor(
      async () => /"serviceNetwork":"198\.\d+\.\d+\.0\/24, /.test(b.output()),
      'the local driver says services get networks of their own',
    );
    const layout = new Layout(inst.dataDir);
    const ca = layout.caCert;

    // B: the victim, in the bootstrap project, with a service with a pooler
    // and one with an HA replica (HAProxy in front). A: the attacker, a
    // project and credential of its own, made with the CLI.
    const victim = new TenantApi(b, bootstrapTenant(b));
    const attacker = new TenantApi(b, await newTenant(inst, 'attacker'));
    const [plain, ha, aSvc] = await Promise.all([
      victim.create('plain'),
      victim.create('ha'),
      attacker.create('attacker'),
    ]);
    await Promise.all([
      victim.waitForStatus(plain.service_id, 'READY'),
      victim.waitForStatus(ha.service_id, 'READY'),
      attacker.waitForStatus(aSvc.service_id, 'READY'),
    ]);
    const enabled = await victim.call('POST', `${victim.path(plain.service_id)}/enablePooler`);
    assert.equal(enabled.status, 200, enabled.text);
    const withHa = await victim.call('POST', `${victim.path(ha.service_id)}/setHA`, {
      replica_count: 1,
    });
    assert.equal(withHa.status, 202, withHa.text);
    const plainView = await victim.waitForStatus(plain.service_id, 'READY');
    await b.waitFor(
      async () => runningNodes(layout, ha.service_id).length === 2,
      "the HA service's two nodes",
      180_000,
    );
    await victim.waitForStatus(ha.service_id, 'READY', 180_000);

    const endpointPort = plain.endpoint.port;
    const poolerPort: number = plainView.connection_pooler.endpoint.port;
    const nodePorts = runningNodes(layout, ha.service_id).map((n) => n.port);
    assert.equal(nodePorts.length, 2);
    assert.ok(!nodePorts.includes(ha.endpoint.port), 'the HA nodes have ports of their own');
    const targets = [endpointPort, poolerPort, ...nodePorts];

    // What B's clients are told to use, and the weakest client there is.
    const strict = (port: number) =>
      conninfo(port, {
        host: 'localhost',
        sslmode: 'verify-full',
        sslrootcert: ca,
        channel_binding: 'require',
      });
    const naive = (port: number) => conninfo(port, { sslmode: 'require' });
    const password = plain.initial_password;
    const haPassword = ha.initial_password;

    // B pauses both services: nothing of B listens any more.
    for (const id of [plain.service_id, ha.service_id]) {
      const stop = await victim.call('POST', `${victim.path(id)}/stop`);
      assert.equal(stop.status, 202, stop.text);
    }
    await victim.waitForStatus(plain.service_id, 'PAUSED');
    await victim.waitForStatus(ha.service_id, 'PAUSED');

    const a = await tenantShell(aSvc, aSvc.initial_password);
    t.after(() => a.end());
    const log = '/tmp/fake.log';
    const started = await startFake(a, log, targets);

    await t.test("A's fake server listens on B's ports, in A's own network", async () => {
      for (const port of targets) assert.ok(started.includes(`bound ${port}`), started.join('\n'));
      // It works: a client inside A's network that trusts it gives it a password.
      await a.run(
        `PGPASSWORD=probe-secret psql "host=127.0.0.1 port=${endpointPort} user=x dbname=x sslmode=require connect_timeout=5" -c 'SELECT 1' >/dev/null 2>&1 || true`,
      );
      assert.ok(
        (await a.run(`cat ${log}`)).includes(`password on ${endpointPort}: probe-secret`),
        'the fake server takes a cleartext password from a client that reaches it',
      );
    });

    await t.test("B's clients never reach it while B is paused", async () => {
      for (const [port, pw] of [
        [endpointPort, password],
        [poolerPort, password],
        [ha.endpoint.port, haPassword],
        ...nodePorts.map((p) => [p, haPassword] as const),
      ] as const) {
        // Verified, and with channel binding (the pooler cannot do it: refused either way).
        await psqlRefused(strict(port), pw);
        // Not verified at all: still nothing reaches A, B's ports lead to B's namespace.
        await psqlRefused(naive(port), pw);
      }
      const lines = await a.run(`cat ${log}`);
      const passwords = lines.filter((l) => l.startsWith('password on'));
      assert.deepEqual(passwords, [`password on ${endpointPort}: probe-secret`], lines.join('\n'));
      assert.ok(
        !lines.some((l) => l.includes(password) || l.includes(haPassword)),
        "no line of A's fake server holds a password of B's",
      );
    });

    await t.test("B starts while A still listens, and B's clients reach B", async () => {
      for (const id of [plain.service_id, ha.service_id]) {
        const start = await victim.call('POST', `${victim.path(id)}/start`);
        assert.equal(start.status, 202, start.text);
      }
      await victim.waitForStatus(plain.service_id, 'READY', 180_000);
      await victim.waitForStatus(ha.service_id, 'READY', 180_000);
      // A's fake server still holds every one of those ports, in its network.
      const listening = await a.run('ss -Hltn');
      for (const port of targets) {
        assert.ok(
          listening.some((l) => l.includes(`0.0.0.0:${port} `)),
          `A still listens on ${port}: ${listening.join('\n')}`,
        );
      }
      const who = `SELECT current_setting('cluster_name')`;
      assert.equal(await psql(strict(endpointPort), password, who), plain.service_id);
      assert.equal(await psql(strict(ha.endpoint.port), haPassword, who), ha.service_id);
      // The pooler does not do channel binding (PgBouncer 1.18): verified TLS alone.
      const viaPooler = conninfo(poolerPort, {
        host: 'localhost',
        sslmode: 'verify-full',
        sslrootcert: ca,
      });
      assert.equal(await psql(viaPooler, password, 'SELECT 1'), '1');
      assert.match(
        await psqlRefused(strict(poolerPort), password),
        /channel binding is required, but server did not offer an authentication method that supports channel binding/,
      );
      // A reaches B only as any client does, through the host's translation:
      // B's namespace's own address is not forwarded to from A's (the host's
      // own connections there are not tracked; nothing untracked is forwarded).
      const bAddress = namespaceAddress(layout, plain.service_id);
      const direct = await a.run(
        `python3 -c "import socket; socket.create_connection(('${bAddress}', ${endpointPort}), 5); print('reached')" 2>&1 | tail -1`,
      );
      assert.ok(!direct.some((l) => l.includes('reached')), direct.join('\n'));
      const lines = await a.run(`cat ${log}`);
      assert.deepEqual(
        lines.filter((l) => l.startsWith('connection on')),
        [`connection on ${endpointPort} from 127.0.0.1`],
        'only A itself ever reached its fake server',
      );
    });

    await t.test(
      "A binds every port of the installation's range; another service's create still works",
      async () => {
        const { min, max } = inst.portRange;
        const all = Array.from({ length: max - min + 1 }, (_, i) => min + i);
        const taken = await startFake(a, '/tmp/fake-all.log', all);
        // Every port but those A's own processes hold already: its server's,
        // and its first fake server's.
        const unbound = all.filter((p) => !taken.includes(`bound ${p}`));
        assert.deepEqual(
          unbound,
          [...targets, aSvc.endpoint.port].sort((x, y) => x - y),
          taken.join('\n'),
        );
        const after = await victim.create('after');
        const ready = await victim.waitForStatus(after.service_id, 'READY');
        assert.ok(all.includes(ready.endpoint.port));
        assert.equal(
          await psql(
            strict(after.endpoint.port),
            after.initial_password,
            `SELECT current_setting('cluster_name')`,
          ),
          after.service_id,
        );
        assert.ok(
          (await a.run('ss -Hltn')).some((l) => l.includes(`0.0.0.0:${ready.endpoint.port} `)),
          "A holds the new service's port number too, in its own network",
        );
      },
    );
  },
);
