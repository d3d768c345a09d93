import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { firstLine, isLineBoundary, linesBackward, type Line } from './backward-lines.js';
import { parseJsonlogLine, parsePgTimestamp } from './jsonlog.js';

async function withFile(content: string | Buffer, fn: (path: string) => Promise<void>) {
  const dir = mkdtempSync(join(tmpdir(), 'basin-lines-'));
  try {
    const path = join(dir, 'f');
    writeFileSync(path, content);
    await fn(path);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function collect(path: string, end: number | undefined, chunkSize: number) {
  const fh = await open(path, 'r');
  try {
    const out: Line[] = [];
    const size = end ?? (await fh.stat()).size;
    for await (const batch of linesBackward(fh, size, chunkSize)) {
      assert.ok(batch.length > 0);
      out.push(...batch);
    }
    return out;
  } finally {
    await fh.close();
  }
}

test('lines come last first with exact offsets, whatever the chunk size', async () => {
  // Multi-byte characters straddle chunk boundaries with small chunks.
  const texts = ['first', '', 'élan ✓ 日本語', 'x'.repeat(50), 'last'];
  const content = texts.map((t) => t + '\n').join('') + 'partial, no newline';
  await withFile(content, async (path) => {
    const buf = Buffer.from(content);
    for (const chunk of [1, 2, 3, 7, 64, 65_536]) {
      const got = await collect(path, undefined, chunk);
      assert.deepEqual(
        got.map((l) => l.text),
        [...texts].reverse(),
        `chunk ${chunk}`,
      );
      for (const l of got) {
        assert.equal(buf.subarray(l.start, l.end - 1).toString('utf8'), l.text);
        assert.equal(buf[l.end - 1], 0x0a);
      }
      // Resuming at a line's end yields that line first.
      const resumed = await collect(path, got[2]!.end, chunk);
      assert.deepEqual(
        resumed.map((l) => l.text),
        texts.slice(0, 3).reverse(),
      );
    }
  });
});

test('a region without a newline, or empty, yields nothing', async () => {
  await withFile('no newline here', async (path) => {
    assert.deepEqual(await collect(path, undefined, 4), []);
    assert.deepEqual(await collect(path, 0, 4), []);
  });
});

test('firstLine and isLineBoundary', async () => {
  await withFile('one\ntwo\nthr', async (path) => {
    const fh = await open(path, 'r');
    try {
      assert.equal(await firstLine(fh), 'one');
      assert.equal(await firstLine(fh, 3), undefined); // longer than a chunk
      const boundaries = [];
      for (let i = 0; i <= 11; i++) if (await isLineBoundary(fh, i)) boundaries.push(i);
      assert.deepEqual(boundaries, [0, 4, 8]);
    } finally {
      await fh.close();
    }
  });
});

test('PostgreSQL log times are read in their zone', () => {
  const utc = Date.parse('2026-11-22T01:54:13.157Z');
  assert.equal(parsePgTimestamp('2026-11-22 01:54:13.157 UTC'), utc);
  assert.equal(parsePgTimestamp('2026-11-22 01:54:13.157 GMT'), utc);
  assert.equal(parsePgTimestamp('2026-11-22 04:54:13.157 +03'), utc);
  assert.equal(parsePgTimestamp('2026-11-21 20:24:13.157 -0530'), utc);
  assert.equal(parsePgTimestamp('2026-11-21 20:54:13.157 EST'), utc);
  assert.equal(parsePgTimestamp('2026-11-22 01:54:13 UTC'), utc - 157);
  for (const bad of ['', 'yesterday', '2026-11-22T01:54:13Z', '2026-11-22 01:54:13.157 Nowhere']) {
    assert.equal(parsePgTimestamp(bad), undefined, bad);
  }
});

test('a jsonlog line maps to its time, severity and message only', () => {
  const rec = parseJsonlogLine(
    JSON.stringify({
      timestamp: '2026-11-22 02:00:13.241 UTC',
      user: 'postgres',
      error_severity: 'ERROR',
      message: 'relation "no_such_table" does not exist',
      statement: 'select * from no_such_table',
    }),
  );
  assert.deepEqual(rec, {
    timeMs: Date.parse('2026-11-22T02:00:13.241Z'),
    severity: 'ERROR',
    message: 'relation "no_such_table" does not exist',
  });
  assert.equal(parseJsonlogLine('{"timestamp":"2026-11-22 02:00:13.241 UTC"}'), undefined);
  assert.equal(parseJsonlogLine('null'), undefined);
});
