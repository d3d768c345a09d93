import assert from 'node:assert/strict';
import { mkdtemp, appendFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { parsePatroniLine, patroniEventsOf, PatroniLogTail } from './patroni-log.js';

// Real lines of a node's patroni.log (Patroni 3.0.2, the partition test of
// 2026-11-29: node1 led, was cut from etcd, demoted itself twice, came back,
// failed its pg_rewind and was copied afresh; then node0's promotion), noise
// included: only its retries of etcd requests, the REST API's tracebacks'
// first lines and all but one of each idle loop line were left out.
const CAPTURED = `2026-11-29 05:01:42,937 INFO: Lock owner: None; I am node1
2026-11-29 05:01:43,032 INFO: trying to bootstrap a new cluster
2026-11-29 05:01:43,032 INFO: Running custom bootstrap script: mv -T -- '/tmp/basin-e2e-20800-DESAHv/basin/local/instances/b3vagufyhqn1/patroni/data/seed' '/tmp/basin-e2e-20800-DESAHv/basin/local/instances/b3vagufyhqn1/patroni/data/pgdata'
2026-11-29 05:01:43,033 INFO: not healthy enough for leader race
2026-11-29 05:01:43,080 INFO: bootstrap in progress
2026-11-29 05:01:43,193 INFO: postmaster pid=22608
2026-11-29 05:01:43.196 UTC [22608] LOG:  redirecting log output to logging collector process
2026-11-29 05:01:43.196 UTC [22608] HINT:  Future log output will appear in directory "log".
2026-11-29 05:01:44,216 INFO: establishing a new patroni connection to the postgres cluster
2026-11-29 05:01:44,250 WARNING: Traceback (most recent call last):
2026-11-29 05:01:44,267 INFO: running post_bootstrap
2026-11-29 05:01:45,284 INFO: establishing a new patroni connection to the postgres cluster
2026-11-29 05:01:45,528 INFO: initialized a new cluster
2026-11-29 05:01:45,683 INFO: no action. I am (node1), the leader with the lock
2026-11-29 05:01:47,683 INFO: Reloading PostgreSQL configuration.
2026-11-29 05:01:48,687 INFO: Lock owner: node1; I am node1
2026-11-29 05:01:48,776 INFO: Assigning synchronous standby status to ['node0']
2026-11-29 05:01:50,932 INFO: Synchronous standby status assigned to ['node0']
2026-11-29 05:01:51,030 INFO: No PostgreSQL configuration items changed, nothing to reload.
2026-11-29 05:01:51,032 WARNING: Loop time exceeded, rescheduling immediately.
2026-11-29 05:01:54,285 INFO: Reconnection allowed, looking for another server.
2026-11-29 05:01:54,285 INFO: Retrying on https://10.231.26.13:2379
2026-11-29 05:01:56,288 INFO: Reconnection allowed, looking for another server.
2026-11-29 05:01:57,660 INFO: Reconnection allowed, looking for another server.
2026-11-29 05:01:57,660 ERROR: Error communicating with DCS
2026-11-29 05:01:57,661 INFO: demoting self because DCS is not accessible and I was a leader
2026-11-29 05:01:57,661 INFO: Demoting self (offline)
2026-11-29 05:01:57,662 WARNING: Loop time exceeded, rescheduling immediately.
2026-11-29 05:01:59,665 INFO: Reconnection allowed, looking for another server.
2026-11-29 05:01:59,665 INFO: Retrying on https://10.231.26.13:2379
2026-11-29 05:02:01,668 INFO: Reconnection allowed, looking for another server.
2026-11-29 05:02:01,668 ERROR: Error communicating with DCS
2026-11-29 05:02:01,929 INFO: establishing a new patroni connection to the postgres cluster
2026-11-29 05:02:01,931 WARNING: Retry got exception: 'connection problems'
2026-11-29 05:02:01,938 WARNING: Failed to determine PostgreSQL state from the connection, falling back to cached role
2026-11-29 05:02:01,938 WARNING: AsyncExecutor is busy, demoting from the main thread
2026-11-29 05:02:01,938 INFO: Demoting self (offline)
2026-11-29 05:02:21,619 ERROR: watchprefix failed: ProtocolError('Connection broken: OSError("(110, \\'ETIMEDOUT\\')")', OSError("(110, 'ETIMEDOUT')"))
2026-11-29 05:02:23,622 INFO: Reconnection allowed, looking for another server.
2026-11-29 05:02:23,622 INFO: Retrying on https://10.231.26.13:2379
2026-11-29 05:02:25,624 INFO: Reconnection allowed, looking for another server.
2026-11-29 05:02:25,625 ERROR: KVCache.run EtcdConnectionFailed('No more machines in the cluster')
2026-11-29 05:02:28,628 INFO: Reconnection allowed, looking for another server.
2026-11-29 05:02:28,628 INFO: Retrying on https://10.231.26.13:2379
2026-11-29 05:02:30,632 INFO: Reconnection allowed, looking for another server.
2026-11-29 05:02:30,632 ERROR: KVCache.run EtcdConnectionFailed('No more machines in the cluster')
2026-11-29 05:02:32,637 INFO: Reconnection allowed, looking for another server.
2026-11-29 05:02:32,637 INFO: Retrying on https://10.231.26.13:2379
2026-11-29 05:02:34,640 INFO: Reconnection allowed, looking for another server.
2026-11-29 05:02:35,812 INFO: Reconnection allowed, looking for another server.
2026-11-29 05:02:35,812 ERROR: KVCache.run EtcdConnectionFailed('No more machines in the cluster')
2026-11-29 05:02:37,814 INFO: Reconnection allowed, looking for another server.
2026-11-29 05:02:37,814 INFO: Retrying on https://10.231.26.13:2379
2026-11-29 05:02:39,819 INFO: Reconnection allowed, looking for another server.
2026-11-29 05:02:41,291 INFO: Reconnection allowed, looking for another server.
2026-11-29 05:02:41,291 ERROR: KVCache.run EtcdConnectionFailed('No more machines in the cluster')
2026-11-29 05:02:43,294 INFO: Reconnection allowed, looking for another server.
2026-11-29 05:02:43,294 INFO: Retrying on https://10.231.26.13:2379
2026-11-29 05:02:45,298 INFO: Reconnection allowed, looking for another server.
2026-11-29 05:02:46,401 INFO: Reconnection allowed, looking for another server.
2026-11-29 05:02:46,401 ERROR: KVCache.run EtcdConnectionFailed('No more machines in the cluster')
2026-11-29 05:02:49,405 INFO: Reconnection allowed, looking for another server.
2026-11-29 05:02:49,405 INFO: Retrying on https://10.231.26.13:2379
2026-11-29 05:02:51,408 INFO: Reconnection allowed, looking for another server.
2026-11-29 05:02:51,408 ERROR: KVCache.run EtcdConnectionFailed('No more machines in the cluster')
2026-11-29 05:02:53,411 INFO: Reconnection allowed, looking for another server.
2026-11-29 05:02:53,411 INFO: Retrying on https://10.231.26.13:2379
2026-11-29 05:02:53.843 UTC [24341] FATAL:  lock file "postmaster.pid" already exists
2026-11-29 05:02:53.843 UTC [24341] HINT:  Is another postmaster (PID 24340) running in data directory "/tmp/basin-e2e-20800-DESAHv/basin/local/instances/b3vagufyhqn1/patroni/data/pgdata"?
2026-11-29 05:02:53,844 INFO: postmaster pid=24340
2026-11-29 05:02:53.853 UTC [24340] LOG:  redirecting log output to logging collector process
2026-11-29 05:02:53.853 UTC [24340] HINT:  Future log output will appear in directory "log".
2026-11-29 05:02:53,856 INFO: postmaster pid=24341
2026-11-29 05:02:54,462 INFO: Selected new etcd server https://10.231.26.13:2379
2026-11-29 05:02:54,862 WARNING: wait_for_startup() called when not in starting state
2026-11-29 05:02:54,876 INFO: demoted self because DCS is not accessible and I was a leader
2026-11-29 05:02:54,877 WARNING: Loop time exceeded, rescheduling immediately.
2026-11-29 05:02:54,877 INFO: establishing a new patroni connection to the postgres cluster
2026-11-29 05:02:55,027 INFO: Lock owner: node0; I am node1
2026-11-29 05:02:55,038 INFO: Local timeline=1 lsn=0/11B9AE0
2026-11-29 05:02:55,059 INFO: primary_timeline=2
2026-11-29 05:02:55,060 INFO: primary: history=1	0/11B9918	no recovery target specified
2026-11-29 05:02:55,112 INFO: running pg_rewind from node0
2026-11-29 05:02:55,161 INFO: running pg_rewind from node0 in progress
2026-11-29 05:02:55,784 INFO: running pg_rewind from dbname=postgres user=basin_replication host=10.231.26.11 port=20723 sslmode=verify-full sslrootcert=/tmp/basin-e2e-20800-DESAHv/basin/local/instances/b3vagufyhqn1/patroni/tls/ca.crt target_session_attrs=read-write
2026-11-29 05:02:55,850 INFO: pg_rewind exit code=1
2026-11-29 05:02:55,850 INFO:  stdout=
2026-11-29 05:02:55,850 INFO:  stderr=pg_rewind: executing "/usr/lib/postgresql/15/bin/postgres" for target server to complete crash recovery
2026-11-29 05:02:55.843 UTC [24442] FATAL:  lock file "postmaster.pid" already exists
2026-11-29 05:02:55.843 UTC [24442] HINT:  Is another postmaster (PID 24340) running in data directory "/tmp/basin-e2e-20800-DESAHv/basin/local/instances/b3vagufyhqn1/patroni/data/pgdata"?
2026-11-29 05:02:55,859 ERROR: Failed to rewind from healty primary: node0
2026-11-29 05:02:55,859 WARNING: remove_data_directory_on_rewind_failure is set. removing...
2026-11-29 05:02:55,859 INFO: Removing data directory: /tmp/basin-e2e-20800-DESAHv/basin/local/instances/b3vagufyhqn1/patroni/data/pgdata
2026-11-29 05:02:56,158 INFO: trying to bootstrap from leader 'node0'
2026-11-29 05:02:56,566 INFO: replica has been created using basebackup
2026-11-29 05:02:56,567 INFO: bootstrapped from leader 'node0'
2026-11-29 05:02:56,569 INFO: closed patroni connection to the postgresql cluster
2026-11-29 05:02:56,719 INFO: postmaster pid=24498
2026-11-29 05:02:56.721 UTC [24498] LOG:  redirecting log output to logging collector process
2026-11-29 05:02:56.721 UTC [24498] HINT:  Future log output will appear in directory "log".
2026-11-29 05:02:56,738 INFO: establishing a new patroni connection to the postgres cluster
2026-11-29 05:02:21,129 INFO: no action. I am (node0), a secondary, and following a leader (node1)
2026-11-29 05:02:21,616 ERROR: watchprefix failed: ProtocolError('Connection broken: OSError("(110, \\'ETIMEDOUT\\')")', OSError("(110, 'ETIMEDOUT')"))
2026-11-29 05:02:25,131 WARNING: Request failed to node1: GET https://10.231.26.12:20725/patroni (HTTPSConnectionPool(host='10.231.26.12', port=20725): Max retries exceeded with url: /patroni (Caused by ConnectTimeoutError(<urllib3.connection.HTTPSConnection object at 0x7f56ca782210>, 'Connection to 10.231.26.12 timed out. (connect timeout=2)')))
2026-11-29 05:02:25,179 WARNING: Traceback (most recent call last):
2026-11-29 05:02:25,287 INFO: promoted self to leader by acquiring session lock
2026-11-29 05:02:25,288 WARNING: Loop time exceeded, rescheduling immediately.
2026-11-29 05:02:25,289 INFO: cleared rewind state after becoming the leader
2026-11-29 05:02:25,288 INFO: Lock owner: node0; I am node0
2026-11-29 05:02:25,383 INFO: updated leader lock during promote
2026-11-29 05:02:25,383 INFO: Lock owner: node0; I am node0
2026-11-29 05:02:25,426 INFO: updated leader lock during promote
2026-11-29 05:02:26,491 INFO: no action. I am (node0), the leader with the lock
2026-11-29 05:02:26,635 INFO: no action. I am (node0), the leader with the lock
`;

const at = (s: string) => {
  const m = /^(\d+)-(\d+)-(\d+) (\d+):(\d+):(\d+),(\d+)/.exec(s)!;
  return new Date(+m[1]!, +m[2]! - 1, +m[3]!, +m[4]!, +m[5]!, +m[6]!, +m[7]!).getTime();
};

test("Patroni's decisions in a captured log become Basin's sentences, in order; its loops, retries, tracebacks and connection strings do not", () => {
  const events = patroniEventsOf(CAPTURED);
  assert.deepEqual(
    events.map((e) => [e.severity, e.text]),
    [
      ['LOG', 'initialized the cluster: primary'],
      ['LOG', 'synchronous standby: node0'],
      ['WARNING', 'demoting: etcd cannot be reached and it was the primary'],
      ['WARNING', 'demoting (offline)'],
      ['WARNING', 'demoting again (the first demotion is still running)'],
      ['WARNING', 'demoting (offline)'],
      ['WARNING', 'demoted: etcd cannot be reached and it was the primary'],
      ['WARNING', 'rejoins: rewinding from node0 (pg_rewind)'],
      ['ERROR', 'pg_rewind failed (exit code 1)'],
      ['ERROR', 'pg_rewind failed from the primary node0'],
      ['ERROR', 'pg_rewind failed: its data directory is removed, to be copied afresh'],
      ['LOG', 'copied with basebackup'],
      ['LOG', 'joined as a standby, copied from node0'],
      // node0's log: its promotion.
      ['WARNING', 'promoted to primary (took the leader lock)'],
    ],
  );
  // Times are Patroni's, in order.
  assert.equal(events[0]!.timeMs, at('2026-11-29 05:01:45,528'));
  for (let i = 1; i < events.length; i++) {
    assert.ok(events[i]!.timeMs >= events[i - 1]!.timeMs || i === events.length - 1);
  }
  // Nothing of a path, an address or a connection string is told.
  const told = events.map((e) => e.text).join('\n');
  assert.doesNotMatch(told, /\/tmp|10\.231|dbname|sslrootcert|user=|password/);
});

test("a switchover's lines (Patroni 3.0.2's texts, ha.py) and forged ones", () => {
  const line = (m: string) => parsePatroniLine(`2026-11-29 06:00:00,001 INFO: ${m}`)?.text;
  assert.equal(
    line('manual failover: demoting myself'),
    'switchover: hands the primary over, demoting',
  );
  assert.equal(line('manual failover: to node2, i am node0'), 'switchover to node2 asked');
  assert.equal(line('Demoting self (graceful)'), 'demoting (graceful)');
  assert.equal(
    line('acquired session lock as a leader'),
    'runs as the primary (took the leader lock)',
  );
  assert.equal(line("Synchronous standby status assigned to ['node1', 'node2']"), 'synchronous standby: node1, node2'); // prettier-ignore
  // Idle loops and anything not whole-message Patroni's are not told.
  assert.equal(line('no action. I am (node1), the leader with the lock'), undefined);
  assert.equal(line('Lock owner: node0; I am node1'), undefined);
  assert.equal(line("bootstrapped from leader 'x; DROP'"), undefined);
  assert.equal(line('running pg_rewind from node0 password=secret'), undefined);
  assert.equal(line('Demoting self (graceful) password=secret'), undefined);
  assert.equal(parsePatroniLine('promoted self to leader by acquiring session lock'), undefined);
});

test('a log is read as it grows: whole lines only, each event once, and from the start again when replaced', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'patroni-log-'));
  try {
    const path = join(dir, 'patroni.log');
    const tail = new PatroniLogTail();
    assert.deepEqual(await tail.events(join(dir, 'none.log'), undefined), []);
    await writeFile(
      path,
      '2026-11-29 06:00:00,001 INFO: initialized a new cluster\n2026-11-29 06:00:01,000 INFO: promoted self',
    );
    assert.deepEqual((await tail.events(path, undefined)).map((e) => e.text), ['initialized the cluster: primary']); // prettier-ignore
    await appendFile(path, ' to leader by acquiring session lock\n');
    const both = await tail.events(path, undefined);
    assert.deepEqual(both.map((e) => e.text), ['initialized the cluster: primary', 'promoted to primary (took the leader lock)']); // prettier-ignore
    // `since` keeps those at or after it.
    assert.deepEqual((await tail.events(path, both[1]!.timeMs)).map((e) => e.text), ['promoted to primary (took the leader lock)']); // prettier-ignore
    await writeFile(path, '2026-11-29 07:00:00,000 INFO: Demoting self (offline)\n');
    assert.deepEqual((await tail.events(path, undefined)).map((e) => e.text), ['demoting (offline)']); // prettier-ignore
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('a log past its bound is emptied once read to its end, its events kept, and read on from its start', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'patroni-log-'));
  try {
    const path = join(dir, 'patroni.log');
    const idle =
      '2026-11-29 06:00:02,000 INFO: no action. I am (node0), the leader with the lock\n';
    const tail = new PatroniLogTail(200);
    await writeFile(
      path,
      `2026-11-29 06:00:00,001 INFO: initialized a new cluster\n${idle.repeat(3)}`,
    );
    // Unended last line: not read to its end, so not emptied.
    await appendFile(path, '2026-11-29 06:00:03,000 INFO: Demoting self');
    assert.deepEqual((await tail.events(path, undefined)).map((e) => e.text), ['initialized the cluster: primary']); // prettier-ignore
    assert.ok((await stat(path)).size > 200);
    await appendFile(path, ' (offline)\n');
    const before = await tail.events(path, undefined);
    assert.deepEqual(before.map((e) => e.text), ['initialized the cluster: primary', 'demoting (offline)']); // prettier-ignore
    assert.equal((await stat(path)).size, 0);
    // The writer appends: its next line is at the start, read as new.
    await appendFile(path, '2026-11-29 06:00:09,000 INFO: acquired session lock as a leader\n');
    assert.deepEqual((await tail.events(path, undefined)).map((e) => e.text), ['initialized the cluster: primary', 'demoting (offline)', 'runs as the primary (took the leader lock)']); // prettier-ignore
    // A small log is left as it is.
    assert.ok((await stat(path)).size > 0);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
