import assert from 'node:assert/strict';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { LogDestination } from './log-destination.js';

function file(t: TestContext): { path: string; fd: number } {
  const dir = mkdtempSync(join(tmpdir(), 'basin-log-'));
  const path = join(dir, 'out.log');
  const fd = openSync(path, 'a');
  t.after(() => {
    closeSync(fd);
    rmSync(dir, { recursive: true, force: true });
  });
  return { path, fd };
}

const line = (i: number) => `{"i":${i},"msg":"${'x'.repeat(i % 50)}é"}\n`;

test('lines are held until minLength, then written in order; flush() writes the rest', async (t) => {
  const { path, fd } = file(t);
  const dest = new LogDestination({ fd, minLength: 4096, flushIntervalMs: 60_000 });
  dest.write(line(0));
  assert.equal(readFileSync(path, 'utf8'), '', 'one short line is held');
  for (let i = 1; i < 5000; i++) dest.write(line(i));
  await dest.flush();
  const want = Array.from({ length: 5000 }, (_, i) => line(i)).join('');
  assert.equal(readFileSync(path, 'utf8'), want);
  await dest.flush(); // nothing held: resolves at once
});

test("pino's logger.flush(cb) gets its callback", async (t) => {
  const { path, fd } = file(t);
  const dest = new LogDestination({ fd, minLength: 1 << 20, flushIntervalMs: 60_000 });
  dest.write(line(7));
  await new Promise<void>((resolve) => void dest.flush(resolve));
  assert.equal(readFileSync(path, 'utf8'), line(7));
});

test('lines held are written within flushIntervalMs when traffic is low', async (t) => {
  const { path, fd } = file(t);
  const dest = new LogDestination({ fd, minLength: 1 << 20, flushIntervalMs: 20 });
  dest.write(line(1));
  for (let i = 0; i < 100 && readFileSync(path, 'utf8') === ''; i++) {
    await new Promise((r) => setTimeout(r, 10));
  }
  assert.equal(readFileSync(path, 'utf8'), line(1));
});

test('flushSync() writes what is held, for the last moments of a process', (t) => {
  const { path, fd } = file(t);
  const dest = new LogDestination({ fd, minLength: 1 << 20, flushIntervalMs: 60_000 });
  dest.write(line(1));
  dest.write(line(2));
  dest.flushSync();
  assert.equal(readFileSync(path, 'utf8'), line(1) + line(2));
});

test('when writing fails, logging stops, once, and flush() still resolves', async (t) => {
  const { fd } = file(t);
  const readOnly = openSync(join(tmpdir()), 'r'); // a directory: writes fail with EISDIR/EBADF
  t.after(() => closeSync(readOnly));
  const dest = new LogDestination({ fd: readOnly, minLength: 10, flushIntervalMs: 60_000 });
  const stderr: string[] = [];
  const write = process.stderr.write.bind(process.stderr);
  process.stderr.write = ((chunk: string) => stderr.push(chunk) > 0) as typeof process.stderr.write;
  try {
    dest.write(line(1));
    await dest.flush();
    assert.equal(dest.write(line(2)), false);
    await dest.flush();
  } finally {
    process.stderr.write = write;
  }
  assert.equal(stderr.length, 1);
  assert.match(stderr[0] as string, /writing the log failed/);
  void fd;
});

test('lines beyond maxLength are dropped and counted while writes cannot keep up', async (t) => {
  const { path, fd } = file(t);
  const dest = new LogDestination({
    fd,
    minLength: 1 << 20,
    flushIntervalMs: 60_000,
    maxLength: 100,
  });
  for (let i = 0; i < 20; i++) dest.write(line(1));
  await dest.flush();
  const lines = readFileSync(path, 'utf8').trimEnd().split('\n');
  const note = JSON.parse(lines[0] as string);
  assert.equal(note.msg, 'log lines dropped: writes could not keep up');
  assert.equal(note.dropped + lines.length - 1, 20);
});

test('chunks are reused once written, without a byte of a line lost or changed', async (t) => {
  const { path, fd } = file(t);
  const dest = new LogDestination({ fd, minLength: 1024, flushIntervalMs: 60_000 });
  const want: string[] = [];
  // ~200 chunks' worth, with multi-byte characters, written while writes are under way.
  for (let i = 0; i < 6000; i++) {
    const l = line(i);
    want.push(l);
    dest.write(l);
    if (i % 500 === 0) await new Promise((r) => setImmediate(r));
  }
  await dest.flush();
  assert.equal(readFileSync(path, 'utf8'), want.join(''));
});

test('a line longer than a chunk is written whole and in order', async (t) => {
  const { path, fd } = file(t);
  // 8 KiB chunks: a 3000-byte line may need 9000 (3 bytes a unit at most).
  const dest = new LogDestination({ fd, minLength: 8192, flushIntervalMs: 60_000 });
  const long = (c: string) => `{"msg":"${c.repeat(3000)}"}\n`;
  const want: string[] = [];
  for (let i = 0; i < 300; i++) {
    const l = i % 3 === 0 ? long(String.fromCharCode(97 + (i % 26))) : line(i);
    want.push(l);
    dest.write(l);
    if (i % 50 === 0) await new Promise((r) => setImmediate(r));
  }
  await dest.flush();
  assert.equal(readFileSync(path, 'utf8'), want.join(''));
});

test('flushSync() while a write is under way leaves the lines after it for flush(), in order', async (t) => {
  const { path, fd } = file(t);
  const dest = new LogDestination({ fd, minLength: 4096, flushIntervalMs: 60_000 });
  const want: string[] = [];
  const write = (l: string) => {
    want.push(l);
    dest.write(l);
  };
  // Chunks fill (~10 kB of lines): a write is handed to the threadpool, and
  // is under way until this synchronous code returns to the event loop.
  for (let i = 0; i < 200; i++) write(line(i));
  const tail = `{"tail":true}\n`;
  write(tail);
  dest.flushSync(); // as pino does after a fatal line
  assert.ok(!readFileSync(path, 'utf8').includes(tail), 'not written ahead of the chunk');
  await dest.flush();
  assert.equal(readFileSync(path, 'utf8'), want.join(''));
});
