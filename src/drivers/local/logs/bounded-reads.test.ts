// Issue 7, hole 3, at the reader: a tenant can write anything into its log
// directory (a huge line, a file with no newline, thousands of files). Every
// page still comes back after a bounded amount of reading, with a cursor to
// continue; the entries around the garbage are all there; an over-long line
// is cut and marked; a client that leaves stops the reading.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { LogEntry, LogQuery } from '../../../domain/logs.js';
import { CHUNK_SIZE } from './backward-lines.js';
import { truncationMark } from './log-page.js';
import { readNodeLogs, type ReadOptions } from './read-node-logs.js';
import { FILE_COST, READ_LIMITS, type ReadLimits } from './scan-budget.js';

const T0 = Date.parse('2026-11-22T00:00:00.000Z');
const SCOPE = 'service:svc0000001:0';
const MiB = 1024 * 1024;

const stamp = (i: number) =>
  new Date(T0 + i * 1000).toISOString().replace('T', ' ').replace('Z', ' UTC');
/** Entry `i`, stamped T0 + i seconds, as PostgreSQL writes it. */
const line = (i: number, message = `entry ${i}`) =>
  JSON.stringify({ timestamp: stamp(i), pid: 7, error_severity: 'LOG', message }) + '\n';
const lines = (from: number, to: number) =>
  Array.from({ length: to - from }, (_, k) => line(from + k)).join('');
const fileName = (n: number) => `postgresql-20261122-${String(n).padStart(6, '0')}.json`;
const entry = (i: number): LogEntry => ({
  timestamp: new Date(T0 + i * 1000).toISOString(),
  severity: 'LOG',
  message: `entry ${i}`,
  source: 'database',
});
const entries = (from: number, to: number) =>
  Array.from({ length: to - from }, (_, k) => entry(to - 1 - k));

function withDir(fn: (dir: string) => Promise<void>) {
  return async () => {
    const dir = mkdtempSync(join(tmpdir(), 'basin-bounded-logs-'));
    try {
      await fn(dir);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };
}

const query = (over: Partial<LogQuery> = {}): LogQuery => ({
  severities: [],
  search: [],
  limit: 500,
  ...over,
});

/** Every page, following cursors, with the bytes each one read. */
async function walk(
  dir: string,
  q: LogQuery,
  limits: Partial<ReadLimits>,
  options: ReadOptions = {},
) {
  const pages: { entries: LogEntry[]; bytes: number; cursor: boolean }[] = [];
  let cursor: string | undefined;
  do {
    let bytes = 0;
    const page = await readNodeLogs(dir, { ...q, cursor }, SCOPE, {
      ...options,
      limits,
      onRead: (n) => (bytes += n),
    });
    assert.ok(page.entries.length <= q.limit);
    pages.push({ entries: page.entries, bytes, cursor: page.nextCursor !== undefined });
    cursor = page.nextCursor;
    assert.ok(pages.length < 1000, 'paging ends');
  } while (cursor !== undefined);
  return { pages, entries: pages.flatMap((p) => p.entries) };
}

test(
  'a huge line among entries: every page is bounded, the entries around it are there, it is cut and marked',
  withDir(async (dir) => {
    const limits = { maxScanBytes: 256 * 1024, maxLineBytes: 16 * 1024 };
    const hugeMessage = 'M'.repeat(8 * MiB);
    const huge = line(50, hugeMessage);
    const garbage = 'not json at all '.repeat(MiB / 16) + '\n'; // 1 MiB, ended: skipped
    writeFileSync(join(dir, fileName(1)), lines(0, 50) + huge + garbage + lines(51, 100));
    // The newest file: 3 MiB and no newline at all, as the attack wrote it.
    writeFileSync(join(dir, fileName(2)), 'x'.repeat(3 * MiB));

    const { pages, entries: got } = await walk(dir, query(), limits);
    assert.ok(pages.length > 3, `${pages.length} pages`);
    for (const p of pages) {
      // The budget, plus what one read or one cut line's start can add to it.
      const bound = limits.maxScanBytes + CHUNK_SIZE + limits.maxLineBytes + FILE_COST;
      assert.ok(p.bytes <= bound, `${p.bytes} bytes read for a page`);
    }
    assert.equal(got.length, 100);
    assert.deepEqual(got.slice(0, 49), entries(51, 100));
    assert.deepEqual(got.slice(50), entries(0, 50));
    const cut = got[49]!;
    assert.equal(cut.timestamp, entry(50).timestamp);
    const kept = limits.maxLineBytes - huge.indexOf('MMM');
    assert.equal(
      cut.message,
      'M'.repeat(kept) + truncationMark(huge.length - 1 - limits.maxLineBytes),
    );
  }),
);

test(
  'the attack at its real size: a file of 40 MiB without a newline, read with the default bounds',
  withDir(async (dir) => {
    writeFileSync(join(dir, fileName(1)), lines(0, 20));
    writeFileSync(join(dir, fileName(2)), Buffer.alloc(40 * MiB, 0x78));
    const { pages, entries: got } = await walk(dir, query(), {});
    assert.ok(pages.length >= 3, `${pages.length} pages`);
    for (const p of pages) assert.ok(p.bytes <= READ_LIMITS.maxScanBytes + CHUNK_SIZE + FILE_COST);
    assert.deepEqual(pages[0], { entries: [], bytes: pages[0]!.bytes, cursor: true });
    assert.deepEqual(got, entries(0, 20));
  }),
);

test(
  'a page that runs out of time answers with what it has and a cursor',
  withDir(async (dir) => {
    writeFileSync(join(dir, fileName(1)), lines(0, 2000));
    let clock = 0;
    const now = () => (clock += 10_000); // every look at the clock: ten seconds later
    // One read of 64 KiB holds some 690 of these lines: fewer than the limit.
    const first = await readNodeLogs(dir, query({ limit: 1000 }), SCOPE, { now });
    assert.ok(first.entries.length > 0 && first.entries.length < 1000, `${first.entries.length}`);
    assert.ok(first.nextCursor);
    const { entries: got } = await walk(dir, query({ limit: 1000 }), {}, { now });
    assert.deepEqual(got, entries(0, 2000));
  }),
);

test(
  'thousands of files cost their opening: pages stop between them and continue',
  withDir(async (dir) => {
    writeFileSync(join(dir, fileName(1)), lines(0, 10));
    for (let n = 2; n <= 400; n++) writeFileSync(join(dir, fileName(n)), '');
    const limits = { maxScanBytes: 40 * 1024 };
    const { pages, entries: got } = await walk(dir, query(), limits);
    assert.ok(pages.length >= 40, `${pages.length} pages`);
    assert.deepEqual(got, entries(0, 10));
  }),
);

test(
  'a directory is listed only so far',
  withDir(async (dir) => {
    for (let n = 1; n <= 50; n++) writeFileSync(join(dir, fileName(n)), line(n));
    const { entries: got } = await walk(dir, query(), { maxListed: 20 });
    assert.ok(got.length > 0 && got.length <= 20, `${got.length} entries`);
  }),
);

test(
  'a client that leaves stops the reading: no read after the abort',
  withDir(async (dir) => {
    // 4 MiB of lines none of which matches: without the abort, all would be read.
    writeFileSync(join(dir, fileName(1)), lines(0, 60_000));
    const ac = new AbortController();
    let bytes = 0;
    let atAbort = 0;
    const reading = readNodeLogs(
      dir,
      query({ search: ['no such words'], signal: ac.signal }),
      SCOPE,
      {
        onRead: (n) => {
          bytes += n;
          if (bytes >= 256 * 1024 && !ac.signal.aborted) {
            ac.abort();
            atAbort = bytes;
          }
        },
      },
    );
    await assert.rejects(reading, { name: 'AbortError' });
    assert.ok(atAbort > 0);
    assert.equal(bytes, atAbort);

    // Gone before it started: nothing is read at all.
    bytes = 0;
    await assert.rejects(
      readNodeLogs(dir, query({ signal: AbortSignal.abort() }), SCOPE, {
        onRead: (n) => (bytes += n),
      }),
      { name: 'AbortError' },
    );
    assert.equal(bytes, 0);
  }),
);
