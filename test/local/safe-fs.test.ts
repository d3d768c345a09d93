// Basin (root) reading and writing in directories a service's OS user owns:
// whatever that user planted there (links, FIFOs, other users' files) is
// neither followed nor read. No PostgreSQL needed.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import {
  chownSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { readNodeLogs } from '../../src/drivers/local/logs/read-node-logs.js';
import { readPasswd } from '../../src/drivers/local/host/os-user.js';
import { readSmallFile, writeFileAs } from '../../src/drivers/local/host/files/safe-fs.js';
import { serviceUserName } from '../../src/drivers/local/host/service-users.js';

const me = { name: 'me', uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0 };
const line = (message: string) =>
  `${JSON.stringify({ timestamp: '2025-01-02 03:04:05.678 UTC', error_severity: 'LOG', message })}\n`;

describe('safe-fs: files in a service user’s directories', () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'basin-safe-fs-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  test('readSmallFile reads a regular file, and refuses links, FIFOs and big files', async () => {
    const secret = join(dir, 'secret');
    writeFileSync(secret, 'not yours');
    writeFileSync(join(dir, 'plain'), 'hello');
    assert.equal(await readSmallFile(join(dir, 'plain')), 'hello');
    symlinkSync(secret, join(dir, 'link'));
    await assert.rejects(readSmallFile(join(dir, 'link')), { code: 'ELOOP' });
    execFileSync('mkfifo', [join(dir, 'fifo')]);
    await assert.rejects(readSmallFile(join(dir, 'fifo')), /not a regular file/);
    symlinkSync('/dev/zero', join(dir, 'zero'));
    await assert.rejects(readSmallFile(join(dir, 'zero')), { code: 'ELOOP' });
    writeFileSync(join(dir, 'big'), Buffer.alloc(5000));
    await assert.rejects(readSmallFile(join(dir, 'big'), { maxBytes: 4096 }), /larger than/);
    await assert.rejects(readSmallFile(join(dir, 'plain'), { owner: me.uid + 1 }), /owned by uid/);
  });

  test('writeFileAs replaces a planted link instead of writing through it', async () => {
    const target = join(dir, 'target');
    writeFileSync(target, 'untouched');
    const conf = join(dir, 'basin.conf');
    symlinkSync(target, conf);
    await writeFileAs(conf, 'new settings', me, 0o600);
    assert.equal(readFileSync(target, 'utf8'), 'untouched');
    assert.equal(readFileSync(conf, 'utf8'), 'new settings');
    assert.equal(statSync(conf).mode & 0o777, 0o600);
  });

  test("readNodeLogs reads only the log owner's regular files, in a real directory", async () => {
    const query = { severities: [], search: [], limit: 10 };
    const logDir = join(dir, 'log');
    mkdirSync(logDir);
    writeFileSync(join(logDir, 'postgresql-20250102-030405.json'), line('own entry'));
    // Another service's log, reached through a link planted in this one.
    const elsewhere = join(dir, 'elsewhere.json');
    writeFileSync(elsewhere, line("another service's entry"));
    symlinkSync(elsewhere, join(logDir, 'postgresql-20250102-030406.json'));
    const page = await readNodeLogs(logDir, query, 's', { owner: me.uid });
    assert.deepEqual(
      page.entries.map((e) => e.message),
      ['own entry'],
    );
    // A file of someone else's, and a log directory that is a link.
    const none = await readNodeLogs(logDir, query, 's', { owner: me.uid + 1 });
    assert.deepEqual(none.entries, []);
    symlinkSync(logDir, join(dir, 'log-link'));
    const linked = await readNodeLogs(join(dir, 'log-link'), query, 's', { owner: me.uid });
    assert.deepEqual(linked.entries, []);
  });

  test('as root, writeFileAs hands the file to the user', async () => {
    assert.equal(me.uid, 0, 'the suite runs as root');
    const postgres = readPasswd().find((p) => p.name === 'postgres');
    assert.ok(postgres);
    const sub = join(dir, 'owned');
    mkdirSync(sub);
    chownSync(sub, postgres.uid, postgres.gid);
    await writeFileAs(join(sub, 'f'), 'x', postgres, 0o640);
    const st = statSync(join(sub, 'f'));
    assert.deepEqual([st.uid, st.gid, st.mode & 0o777], [postgres.uid, postgres.gid, 0o640]);
  });

  test('service user names fit the 32 characters useradd accepts, and stay unique', () => {
    assert.equal(serviceUserName('abc123defg'), 'basin-abc123defg');
    const long = serviceUserName('a'.repeat(32));
    assert.equal(long.length, 32);
    assert.notEqual(long, serviceUserName(`${'a'.repeat(31)}b`));
    assert.match(long, /^basin-a+-[0-9a-f]{8}$/);
  });
});
