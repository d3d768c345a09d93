import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  BackwardLines,
  firstLine,
  isLineBoundary,
  utf8Prefix,
  type Line,
  type ReadPoint,
} from './backward-lines.js';
import { READ_LIMITS, ScanBudget } from './scan-budget.js';
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

/** Every line of `[0, end)` (the whole file by default), in as many reads as it takes. */
async function collect(
  path: string,
  end: number | undefined,
  chunkSize: number,
  maxLineBytes = 1 << 30,
) {
  const fh = await open(path, 'r');
  try {
    const out: Line[] = [];
    const size = end ?? (await fh.stat()).size;
    const lines = new BackwardLines(fh, { pos: size }, { chunkSize, maxLineBytes });
    for (let batch = await lines.next(); batch; batch = await lines.next()) {
      assert.ok(batch.length > 0);
      out.push(...batch);
    }
    assert.ok(lines.finished);
    return out;
  } finally {
    await fh.close();
  }
}

/**
 * The same, read as requests would with a budget of `maxScanBytes` each:
 * a new reader per request, resuming where the last one paused. Returns
 * the lines, how many requests it took and the bytes read in all.
 */
async function collectPaused(
  path: string,
  chunkSize: number,
  maxLineBytes: number,
  maxScanBytes: number,
) {
  const fh = await open(path, 'r');
  try {
    const out: Line[] = [];
    let point: ReadPoint = { pos: (await fh.stat()).size };
    let requests = 0;
    let bytes = 0;
    for (;;) {
      requests++;
      const limits = { ...READ_LIMITS, maxScanBytes, maxLineBytes };
      const budget = new ScanBudget(limits, undefined, (n) => (bytes += n));
      const lines = new BackwardLines(fh, point, { chunkSize, maxLineBytes, budget });
      for (let batch = await lines.next(); batch; batch = await lines.next()) out.push(...batch);
      if (lines.finished) return { lines: out, requests, bytes };
      point = lines.point;
    }
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

test('a line longer than the maximum comes out cut, with the bytes left out counted', async () => {
  const long = 'é'.repeat(40) + 'x'.repeat(21); // 101 bytes; a cut at 50 falls inside an é
  const texts = ['first', long, 'y'.repeat(50), 'last'];
  const content = texts.map((t) => t + '\n').join('');
  await withFile(content, async (path) => {
    for (const chunk of [1, 3, 7, 64, 65_536]) {
      const got = await collect(path, undefined, chunk, 50);
      assert.deepEqual(
        got.map((l) => [l.text, l.cut]),
        [
          ['last', 0],
          ['y'.repeat(50), 0], // exactly the maximum is whole
          ['é'.repeat(25), 51], // 50 bytes kept; no half character
          ['first', 0],
        ],
        `chunk ${chunk}`,
      );
      assert.equal(got[2]!.end - got[2]!.start - 1, 101);
    }
  });
});

test('a reader paused by its budget resumes anywhere, inside a long line or an unended tail', async () => {
  const lines = Array.from({ length: 30 }, (_, i) =>
    i % 7 === 3 ? `long ${i} `.repeat(40) : `line ${i}`,
  );
  const content = lines.map((t) => t + '\n').join('') + 'an unended tail '.repeat(20);
  await withFile(content, async (path) => {
    const whole = await collect(path, undefined, 16, 64);
    for (const budget of [1, 16, 50, 200]) {
      const paused = await collectPaused(path, 16, 64, budget);
      assert.deepEqual(paused.lines, whole, `budget ${budget}`);
      assert.ok(paused.requests > 1);
    }
  });
});

test('the bytes read for a huge line are about its length, not its square', async () => {
  const huge = 'h'.repeat(4 * 1024 * 1024);
  await withFile(`before\n${huge}\nafter\n${huge}`, async (path) => {
    const size = 2 * huge.length + 15;
    const { lines, bytes } = await collectPaused(path, 64 * 1024, 1024, Number.MAX_SAFE_INTEGER);
    assert.deepEqual(
      lines.map((l) => [l.text.length, l.cut]),
      [
        [5, 0],
        [1024, huge.length - 1024],
        [6, 0],
      ],
    );
    // Every byte once, plus the kept start of the long line read again.
    assert.ok(bytes <= size + 1024, `${bytes} bytes read for ${size}`);
  });
});

test('a cut never leaves half a character', () => {
  const text = 'a€😀';
  const bytes = Buffer.from(text); // 1 + 3 + 4 bytes
  const prefixes = [0, 1, 2, 3, 4, 5, 6, 7, 8].map((n) => utf8Prefix(bytes.subarray(0, n)));
  assert.deepEqual(prefixes, ['', 'a', 'a', 'a', 'a€', 'a€', 'a€', 'a€', text]);
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
