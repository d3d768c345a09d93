// Basin's patch to Debian's Patroni 3.0.2 (scripts/patroni/leader-key-txn.patch,
// applied by scripts/setup-host.sh into /usr/local/lib/basin-patroni): it
// still applies to the installed package, the copy Basin runs is that
// package with the patch, and against a real etcd the patched Patroni never
// takes a leader key another member holds (Debian's own does: the split
// brain of docs/decisions.md, "HA across hosts", "A partition").

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

async function withEtcd(fn: (endpoint: string) => Promise<void>) {
  const dir = mkdtempSync(join(tmpdir(), 'basin-patroni-etcd-'));
  const [client, peer] = [await freePort(), await freePort()];
  const etcd = spawn(
    'etcd',
    [
      `--data-dir=${join(dir, 'data')}`,
      `--listen-client-urls=http://127.0.0.1:${client}`,
      `--advertise-client-urls=http://127.0.0.1:${client}`,
      `--listen-peer-urls=http://127.0.0.1:${peer}`,
      `--initial-advertise-peer-urls=http://127.0.0.1:${peer}`,
      `--initial-cluster=default=http://127.0.0.1:${peer}`,
    ],
    { stdio: 'ignore' },
  );
  try {
    for (;;) {
      const h = spawnSync('etcdctl', [`--endpoints=127.0.0.1:${client}`, 'endpoint', 'health']);
      if (h.status === 0) break;
      if (etcd.exitCode !== null) assert.fail(`etcd exited (${etcd.exitCode})`);
      await sleep(200);
    }
    await fn(`127.0.0.1:${client}`);
  } finally {
    etcd.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
}

function run(modules: string, endpoint: string): string[] {
  const r = spawnSync('/usr/bin/python3', ['-c', SCRIPT, modules, endpoint], {
    encoding: 'utf8',
    env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' },
  });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout.trim().split('\n');
}

test("the patched Patroni never renews a leader key another member holds; Debian's takes it", async () => {
  await withEtcd(async (endpoint) => {
    assert.deepEqual(run(BASIN, endpoint), [
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
    assert.deepEqual(run(DEBIAN, endpoint).slice(2, 4), ['b renews True', 'holder b']);
  });
});
