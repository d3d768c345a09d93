// Basin's patches to Debian's Patroni 3.0.2 (scripts/patroni/*.patch,
// applied by scripts/setup-host.sh into /usr/local/lib/basin-patroni): they
// still apply to the installed package, the copy Basin runs is that package
// with the patches, and against a real etcd the patched Patroni
// - never takes a leader key another member holds (leader-key-txn.patch;
//   Debian's own does: the split brain of docs/decisions.md, "HA across
//   hosts", "A partition");
// - moves its watch stream to the member its client switched to, over TLS
//   as Basin runs it, and gives that stream the keepalive of its timing
//   (watch-stream.patch; Debian's own keeps the stream on the member it
//   left, lost, until a keepalive of ttl 30 gives up: "The watch on a lost
//   member").

import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { PATRONI_BIN } from '../../src/drivers/local/patroni/patroni.js';
import { ROOT } from '../harness/root.js';

const DEBIAN = '/usr/lib/python3/dist-packages';
const PATCHES = join(ROOT, 'scripts', 'patroni');
const BASIN = dirname(dirname(PATRONI_BIN));

const patches = () =>
  readdirSync(PATCHES)
    .filter((f) => f.endsWith('.patch'))
    .map((f) => join(PATCHES, f));

function patch(dir: string, file: string, dryRun: boolean) {
  const args = ['-p1', '--forward', '--batch', '-d', dir, '-i', file];
  return spawnSync('patch', dryRun ? ['--dry-run', ...args] : args, { encoding: 'utf8' });
}

test("the patches apply to Debian's installed Patroni, and the copy Basin runs is that", () => {
  const work = mkdtempSync(join(tmpdir(), 'basin-patroni-patch-'));
  try {
    cpSync(join(DEBIAN, 'patroni'), join(work, 'patroni'), { recursive: true });
    for (const p of patches()) {
      const dry = patch(DEBIAN, p, true);
      assert.equal(dry.status, 0, `${p} against ${DEBIAN}: ${dry.stdout}${dry.stderr}`);
      const r = patch(work, p, false);
      assert.equal(r.status, 0, `${p}: ${r.stdout}${r.stderr}`);
    }
    const file = 'patroni/dcs/etcd3.py';
    assert.equal(
      readFileSync(join(BASIN, file), 'utf8'),
      readFileSync(join(work, file), 'utf8'),
      `${BASIN} is not Debian's Patroni with the patches: run npm run setup`,
    );
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
});

async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((ok) => srv.listen(0, '127.0.0.1', ok));
  const { port } = srv.address() as { port: number };
  await new Promise((ok) => srv.close(ok));
  return port;
}

// Two members, a and b, over Patroni's own etcd3 client. b has read the
// cluster (a leads) and renews "its" leader key, as a healed partition's old
// primary does from its watch cache. Prints one line per step.
const SCRIPT = `
import sys
sys.path.insert(0, sys.argv[1])
from patroni.dcs.etcd3 import Etcd3
def node(name):
    return Etcd3({'hosts': sys.argv[2], 'ttl': 10, 'retry_timeout': 5, 'loop_wait': 2,
                  'scope': 'pfix', 'namespace': '/t', 'name': name})
a, b = node('a'), node('b')
a.get_cluster()
print('a acquires', bool(a.attempt_to_acquire_leader()))
a.get_cluster()
print('a renews', bool(a.update_leader(None)))
b.get_cluster()
print('b renews', bool(b.update_leader(None)))
import base64
print('holder', base64.b64decode(b._client.range(b.leader_path)['kvs'][0]['value']).decode())
a._client.deleterange(a.leader_path)
a._lease = None
print('a renews a key gone', bool(a.update_leader(None)))
print('holder', base64.b64decode(a._client.range(a.leader_path)['kvs'][0]['value']).decode())
`;

/**
 * A throwaway etcd member on free ports with `clients` client URLs (two
 * give one member two addresses, `first` and `second`, a client can switch
 * between); over TLS with a self-signed certificate (`ca`) when `tls`.
 */
async function withEtcd(
  fn: (first: string, second: string, ca: string) => Promise<void>,
  opts: { clients?: number; tls?: boolean } = {},
) {
  const dir = mkdtempSync(join(tmpdir(), 'basin-patroni-etcd-'));
  const scheme = opts.tls ? 'https' : 'http';
  const clients: number[] = [];
  for (let i = 0; i < (opts.clients ?? 1); i++) clients.push(await freePort());
  const peer = await freePort();
  const endpoints = clients.map((p) => `127.0.0.1:${p}`);
  const urls = endpoints.map((e) => `${scheme}://${e}`).join(',');
  const [cert, key] = [join(dir, 'cert.pem'), join(dir, 'key.pem')];
  if (opts.tls) {
    const r = spawnSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:P-256',
        '-nodes',
        '-days',
        '1',
      ].concat([
        '-subj',
        '/CN=127.0.0.1',
        '-addext',
        'subjectAltName=IP:127.0.0.1',
        '-keyout',
        key,
        '-out',
        cert,
      ]),
      { encoding: 'utf8' },
    );
    assert.equal(r.status, 0, r.stderr);
  }
  const etcd = spawn(
    'etcd',
    [
      `--data-dir=${join(dir, 'data')}`,
      `--listen-client-urls=${urls}`,
      `--advertise-client-urls=${urls}`,
      `--listen-peer-urls=http://127.0.0.1:${peer}`,
      `--initial-advertise-peer-urls=http://127.0.0.1:${peer}`,
      `--initial-cluster=default=http://127.0.0.1:${peer}`,
      ...(opts.tls ? [`--cert-file=${cert}`, `--key-file=${key}`] : []),
    ],
    { stdio: 'ignore' },
  );
  try {
    const tlsArgs = opts.tls ? [`--cacert=${cert}`] : [];
    for (;;) {
      const h = spawnSync('etcdctl', [`--endpoints=${urls}`, ...tlsArgs, 'endpoint', 'health']);
      if (h.status === 0) break;
      if (etcd.exitCode !== null) assert.fail(`etcd exited (${etcd.exitCode})`);
      await sleep(200);
    }
    const [first = '', second = first] = endpoints;
    await fn(first, second, cert);
  } finally {
    etcd.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
}

function run(script: string, args: string[]): string[] {
  const r = spawnSync('/usr/bin/python3', ['-c', script, ...args], {
    encoding: 'utf8',
    env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' },
  });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout.trim().split('\n');
}

test("the patched Patroni never renews a leader key another member holds; Debian's takes it", async () => {
  await withEtcd(async (endpoint) => {
    assert.deepEqual(run(SCRIPT, [BASIN, endpoint]), [
      'a acquires True',
      'a renews True',
      'b renews False',
      'holder a',
      'a renews a key gone True',
      'holder a',
    ]);
  });
  // The fault the patch mends, shown on the package as Debian ships it.
  await withEtcd(async (endpoint) => {
    assert.deepEqual(run(SCRIPT, [DEBIAN, endpoint]).slice(2, 4), ['b renews True', 'holder b']);
  });
});

// One member with two client URLs, over TLS as Basin's members are (which
// makes python-etcd's urllib3 use pyOpenSSL), and Patroni's own Etcd3 class
// on both, as a node at its first start: Patroni's default timing (ttl 30),
// then its dynamic configuration's (Basin's ttl 10, loop_wait 2,
// retry_timeout 4), then its client switched to the second URL, as Patroni
// switches when a request to a member fails. Prints one line per step: the
// watch stream's peer port and keepalive (TCP_KEEPIDLE s, TCP_USER_TIMEOUT
// ms), and what kill_stream() logged. With argv[5] 'fault' it stops there
// (Debian's watch never moves: waiting for it would only wait out its
// keepalive).
const WATCH_SCRIPT = `
import logging, socket, sys, time
sys.path.insert(0, sys.argv[1])
import urllib3
from patroni.dcs.etcd3 import Etcd3
first, second, ca = sys.argv[2], sys.argv[3], sys.argv[4]
errors = []
class Errors(logging.Handler):
    def emit(self, record):
        if 'socket.shutdown' in record.getMessage():
            errors.append(record.getMessage().split(':')[1].split('(')[0].strip())
log = logging.getLogger('patroni.dcs.etcd3')
log.setLevel(logging.DEBUG)
log.addHandler(Errors())
dcs = Etcd3({'hosts': first + ',' + second, 'use_proxies': True, 'protocol': 'https', 'cacert': ca,
             'ttl': 30, 'loop_wait': 10, 'retry_timeout': 10, 'scope': 'w', 'namespace': '/t', 'name': 'a'})
cache = dcs._client._kv_cache
def stream(port):
    # The stream's socket once it is up on port: 'port idle user_timeout'; None after ~60 s without.
    for _ in range(600):
        with cache._response_lock:
            r = cache._response
            s = r.connection.sock if isinstance(r, urllib3.response.HTTPResponse) and r.connection else None
            s = getattr(s, 'socket', s)
            try:
                if s and s.getpeername()[1] == port:
                    return '%d %d %d' % (port, s.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
                                         s.getsockopt(socket.IPPROTO_TCP, 18))
            except OSError:
                pass
        time.sleep(0.1)
p1, p2 = (int(e.rsplit(':', 1)[1]) for e in (first, second))
dcs.get_cluster()
print('watch', stream(p1))
dcs.reload_config({'ttl': 10, 'loop_wait': 2, 'retry_timeout': 4, 'etcd3': {}})
print('reloaded', stream(p1))
dcs._client.set_base_uri('https://' + second)
print('kill_stream errors', errors)
if sys.argv[5] != 'fault':
    print('switched', stream(p2))
`;

test("the patched Patroni's watch follows its client to another member with its timing's keepalive; Debian's stays", async () => {
  await withEtcd(
    async (first, second, ca) => {
      const [p1, p2] = [first, second].map((e) => e.split(':')[1] ?? '');
      assert.deepEqual(run(WATCH_SCRIPT, [BASIN, first, second, ca, 'fixed']), [
        `watch ${p1} 20 30000`,
        `reloaded ${p1} 6 10000`,
        'kill_stream errors []',
        `switched ${p2} 6 10000`,
      ]);
      // The fault the patch mends, on the package as Debian ships it.
      assert.deepEqual(run(WATCH_SCRIPT, [DEBIAN, first, second, ca, 'fault']), [
        `watch ${p1} 20 30000`,
        `reloaded ${p1} 20 30000`,
        "kill_stream errors ['TypeError']",
      ]);
    },
    { clients: 2, tls: true },
  );
});
