import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import Database from 'better-sqlite3';
import { watchCommits } from './commit-watch.js';

function database(t: TestContext, wal: boolean) {
  const dir = mkdtempSync(join(tmpdir(), 'basin-watch-'));
  const file = join(dir, 'db');
  const writer = new Database(file);
  if (wal) writer.pragma('journal_mode = WAL');
  writer.exec('CREATE TABLE t (x INTEGER)');
  const reader = new Database(file, { readonly: true });
  t.after(() => {
    reader.close();
    writer.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return { file, writer, reader };
}

for (const wal of [true, false]) {
  test(`every commit is seen, and nothing else (${wal ? 'WAL: the wal-index header' : 'rollback journal: data_version'})`, (t) => {
    const { file, writer, reader } = database(t, wal);
    const watch = watchCommits(reader);
    assert.equal(watch.constructor.name, wal ? 'WalHeaderWatch' : 'DataVersionWatch');
    assert.equal(watch.changed(), true, 'the first look');
    assert.equal(watch.changed(), false);
    reader.prepare('SELECT count(*) FROM t').get();
    assert.equal(watch.changed(), false, 'reads commit nothing');

    for (let i = 0; i < 100; i++) {
      writer.prepare('INSERT INTO t VALUES (?)').run(i);
      assert.equal(watch.changed(), true, `commit ${i}`);
      assert.equal(watch.changed(), false);
    }
    // A checkpoint moves no data a reader could see.
    if (wal) {
      writer.pragma('wal_checkpoint(TRUNCATE)');
      writer.prepare('INSERT INTO t VALUES (1)').run();
      assert.equal(watch.changed(), true, 'a commit after the WAL was reset');
    }
    // A rolled back transaction commits nothing.
    writer.exec('BEGIN IMMEDIATE; INSERT INTO t VALUES (2); ROLLBACK');
    watch.changed();
    assert.equal(watch.changed(), false);

    // Another process's commit, as the CLI makes one.
    execFileSync(process.execPath, [
      '-e',
      `const D = require('better-sqlite3'); const db = new D(${JSON.stringify(file)}); db.prepare('INSERT INTO t VALUES (3)').run(); db.close();`,
    ]);
    assert.equal(watch.changed(), true, "another process's commit");
    assert.equal(watch.changed(), false);
    watch.close();
    watch.close(); // a store closed twice closes nothing else
  });
}

test('a descriptor closed behind its back and reused for another file is noticed, not read as a header', (t) => {
  const { file, writer, reader } = database(t, true);
  const watch = watchCommits(reader);
  t.after(() => watch.close());
  watch.changed();
  assert.equal(watch.changed(), false);
  // A double close elsewhere in the process frees the number; the next open takes it.
  const fd = (watch as unknown as { fd: number }).fd;
  closeSync(fd);
  const other = join(file + '-other');
  writeFileSync(other, 'x'.repeat(4096));
  assert.equal(openSync(other, 'r'), fd);
  assert.equal(watch.changed(), true, 'not a header: the cache is emptied');
  // From then on, data_version: commits are still seen.
  assert.equal(watch.changed(), false);
  writer.prepare('INSERT INTO t VALUES (1)').run();
  assert.equal(watch.changed(), true);
  assert.equal(watch.changed(), false);
  closeSync(fd);
});
