import { test } from 'node:test';
import assert from 'node:assert/strict';
import { appendFileSync, mkdirSync, mkdtempSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { encodeCursor } from '../../../lib/cursor.js';
import { InvalidCursorError } from '../../../lib/cursor.js';
import type { LogEntry, LogQuery } from '../../../domain/logs.js';
import { readNodeLogs } from './read-node-logs.js';

const T0 = Date.parse('2026-11-22T00:00:00.000Z');
const SCOPE = 'service:svc0000001:0';
const SEVERITIES = ['LOG', 'LOG', 'ERROR', 'WARNING', 'LOG', 'FATAL'];
const WORDS = ['checkpoint starting', 'Connection received', 'duplicate KEY value', 'autovacuum'];

/** Entry `i` is stamped T0 + i seconds; ~450 bytes a line, so big files span several chunks. */
function record(i: number) {
  return {
    timestamp: new Date(T0 + i * 1000).toISOString().replace('T', ' ').replace('Z', ' UTC'),
    pid: 1000 + i,
    error_severity: SEVERITIES[i % SEVERITIES.length]!,
    message: `entry ${i}: ${WORDS[i % WORDS.length]}`,
    detail: 'd'.repeat(300),
    backend_type: 'client backend',
  };
}

function entry(i: number): LogEntry {
  const r = record(i);
  return {
    timestamp: new Date(T0 + i * 1000).toISOString(),
    severity: r.error_severity,
    message: r.message,
    source: 'database',
  };
}

const line = (i: number) => JSON.stringify(record(i)) + '\n';
const lines = (from: number, to: number) =>
  Array.from({ length: to - from }, (_, k) => line(from + k)).join('');
/** File names as PostgreSQL makes them; `n` orders them. */
const fileName = (n: number) => `postgresql-20261122-${String(n).padStart(6, '0')}.json`;

function withDir(fn: (dir: string) => Promise<void>) {
  return async () => {
    const dir = mkdtempSync(join(tmpdir(), 'basin-logs-'));
    try {
      await fn(dir);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };
}

function query(over: Partial<LogQuery> = {}): LogQuery {
  return { severities: [], search: [], limit: 500, ...over };
}

/** Every page from the newest, following cursors; checks the paging invariants. */
async function walk(dir: string, q: LogQuery) {
  const pages: LogEntry[][] = [];
  let cursor: string | undefined;
  do {
    const page = await readNodeLogs(dir, { ...q, cursor }, SCOPE);
    assert.ok(page.entries.length <= q.limit);
    if (page.nextCursor !== undefined) assert.equal(page.entries.length, q.limit);
    pages.push(page.entries);
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  return { pages, entries: pages.flat() };
}

const range = (from: number, to: number) => Array.from({ length: to - from }, (_, k) => from + k);
/** Entries `from` (inclusive) to `to` (exclusive), newest first. */
const expected = (ids: number[]) => ids.map(entry).reverse();

test('a missing log directory is an empty page', async () => {
  const page = await readNodeLogs('/nonexistent/basin/log', query(), SCOPE);
  assert.deepEqual(page, { entries: [] });
});

test(
  'pages across files are newest first, without gaps or duplicates',
  withDir(async (dir) => {
    // 3 files, the middle one several chunks long, plus files that are not jsonlog.
    writeFileSync(join(dir, fileName(1)), lines(0, 40));
    writeFileSync(join(dir, fileName(2)), lines(40, 700));
    writeFileSync(join(dir, fileName(3)), lines(700, 713));
    writeFileSync(join(dir, 'postgresql-20261122-000003.log'), 'LOG:  stderr output\n');
    writeFileSync(join(dir, 'notes.json'), line(9999));
    for (const limit of [1, 7, 13, 500, 10_000]) {
      const { pages, entries } = await walk(dir, query({ limit }));
      assert.deepEqual(entries, expected(range(0, 713)), `limit ${limit}`);
      assert.equal(pages.length, Math.ceil(713 / limit));
    }
  }),
);

test(
  'an exactly full last page has no cursor',
  withDir(async (dir) => {
    writeFileSync(join(dir, fileName(1)), lines(0, 10));
    writeFileSync(join(dir, fileName(2)), lines(10, 30));
    const whole = await readNodeLogs(dir, query({ limit: 30 }), SCOPE);
    assert.equal(whole.entries.length, 30);
    assert.equal(whole.nextCursor, undefined);
    const { pages } = await walk(dir, query({ limit: 10 }));
    assert.deepEqual(
      pages.map((p) => p.length),
      [10, 10, 10],
    );
    // The same holds when the only older lines do not match.
    const errors = await walk(dir, query({ limit: 5, severities: ['ERROR'] }));
    assert.deepEqual(
      errors.pages.map((p) => p.length),
      [5],
    );
  }),
);

test(
  'filters combine with AND, bounds are exclusive, and paging follows them',
  withDir(async (dir) => {
    writeFileSync(join(dir, fileName(1)), lines(0, 300));
    writeFileSync(join(dir, fileName(2)), lines(300, 600));
    const since = new Date(T0 + 100 * 1000);
    const until = new Date(T0 + 500 * 1000);
    const cases: [Partial<LogQuery>, (i: number) => boolean][] = [
      [{ severities: ['ERROR', 'FATAL'] }, (i) => [2, 5].includes(i % 6)],
      [{ search: ['KEY', 'duplicate'] }, (i) => i % 4 === 2],
      [{ search: ['checkpoint', 'entry 1'] }, (i) => i % 4 === 0 && String(i).startsWith('1')],
      [{ since, until }, (i) => i > 100 && i < 500],
      [
        { since, until, severities: ['LOG'], search: ['AUTOVACUUM'] },
        (i) => i > 100 && i < 500 && [0, 1, 4].includes(i % 6) && i % 4 === 3,
      ],
      [{ search: ['no such words'] }, () => false],
    ];
    for (const [filters, keep] of cases) {
      const want = expected(range(0, 600).filter(keep));
      for (const limit of [3, 1000]) {
        const { entries } = await walk(dir, query({ ...filters, limit }));
        assert.deepEqual(entries, want, `${JSON.stringify(filters)} limit ${limit}`);
      }
    }
  }),
);

test(
  'reading stops once the page is full or since is passed: older files are not touched',
  withDir(async (dir) => {
    // An "old file" that cannot be read: reaching it would throw EISDIR.
    mkdirSync(join(dir, fileName(1)));
    writeFileSync(join(dir, fileName(2)), lines(0, 100));
    const page = await readNodeLogs(dir, query({ limit: 10 }), SCOPE);
    assert.deepEqual(page.entries, expected(range(90, 100)));
    assert.ok(page.nextCursor);
    const since = new Date(T0 + 50 * 1000);
    const recent = await readNodeLogs(dir, query({ since }), SCOPE);
    assert.deepEqual(recent.entries, expected(range(51, 100)));
    assert.equal(recent.nextCursor, undefined);
  }),
);

test(
  'a cursor survives rotation and appends: the next page continues where it was',
  withDir(async (dir) => {
    writeFileSync(join(dir, fileName(1)), lines(0, 20));
    writeFileSync(join(dir, fileName(2)), lines(20, 30));
    const first = await readNodeLogs(dir, query({ limit: 15 }), SCOPE);
    assert.deepEqual(first.entries, expected(range(15, 30)));
    // PostgreSQL writes on and rotates.
    appendFileSync(join(dir, fileName(2)), lines(30, 35));
    writeFileSync(join(dir, fileName(3)), lines(35, 50));
    const second = await readNodeLogs(dir, query({ limit: 15, cursor: first.nextCursor }), SCOPE);
    assert.deepEqual(second.entries, expected(range(0, 15)));
    assert.equal(second.nextCursor, undefined);
    // A fresh read sees everything.
    assert.deepEqual((await walk(dir, query({ limit: 15 }))).entries, expected(range(0, 50)));
  }),
);

test(
  "a cursor whose file was deleted continues with the next older file's end",
  withDir(async (dir) => {
    writeFileSync(join(dir, fileName(1)), lines(0, 10));
    writeFileSync(join(dir, fileName(2)), lines(10, 20));
    writeFileSync(join(dir, fileName(3)), lines(20, 30));
    const first = await readNodeLogs(dir, query({ limit: 5 }), SCOPE);
    const second = await readNodeLogs(dir, query({ limit: 10, cursor: first.nextCursor }), SCOPE);
    assert.deepEqual(second.entries, expected(range(15, 25)));
    unlinkSync(join(dir, fileName(2))); // its cursor points into file 2
    const third = await readNodeLogs(dir, query({ limit: 10, cursor: second.nextCursor }), SCOPE);
    assert.deepEqual(third.entries, expected(range(0, 10)));
    assert.equal(third.nextCursor, undefined);
    // Retention took everything older: an empty last page.
    unlinkSync(join(dir, fileName(1)));
    const gone = await readNodeLogs(dir, query({ limit: 10, cursor: second.nextCursor }), SCOPE);
    assert.deepEqual(gone, { entries: [] });
  }),
);

test(
  'torn and malformed lines are skipped; a finished line shows up next time',
  withDir(async (dir) => {
    const junk = [
      'not json at all\n',
      '{"timestamp":"2026-11-22 00:00:05.000 UTC","error_severity":"LOG"\n', // torn
      '{"timestamp":"yesterday","error_severity":"LOG","message":"bad time"}\n',
      '{"timestamp":"2026-11-22 00:00:05.000 UTC","message":"no severity"}\n',
      '[1,2,3]\n',
      '\n',
      '\u0000\u0000\u0000\n', // what a crash may leave
    ].join('');
    const path = join(dir, fileName(1));
    const last = line(3);
    writeFileSync(path, junk + lines(0, 3) + junk + last.slice(0, 40));
    const page = await readNodeLogs(dir, query(), SCOPE);
    assert.deepEqual(page, { entries: expected(range(0, 3)) });
    appendFileSync(path, last.slice(40));
    assert.deepEqual((await readNodeLogs(dir, query(), SCOPE)).entries, expected(range(0, 4)));
  }),
);

test(
  'cursors not issued here, or for another scope, are rejected',
  withDir(async (dir) => {
    writeFileSync(join(dir, fileName(1)), lines(0, 10));
    const page = await readNodeLogs(dir, query({ limit: 3 }), SCOPE);
    const good = page.nextCursor!;
    const lineEnd = line(0).length; // a real boundary
    const bad = [
      '',
      'garbage',
      good.slice(0, -2),
      good + 'A',
      Buffer.from('{"v":1,"s":"x"}').toString('base64url'),
      encodeCursor({ k: 'service', t: 'svc0000001', n: 0, i: 5 }), // the sim's
      encodeCursor({ s: SCOPE, f: fileName(1), o: '12' }),
      encodeCursor({ s: SCOPE, f: '../../etc/passwd', o: lineEnd }),
      encodeCursor({ s: SCOPE, f: fileName(1), o: -1 }),
      encodeCursor({ s: SCOPE, f: fileName(1), o: lineEnd + 1 }), // inside a line
      encodeCursor({ s: SCOPE, f: fileName(1), o: 1e9 }), // past the end
      // Stopped inside a line: the line must end after the position, at a boundary, in the file.
      encodeCursor({ s: SCOPE, f: fileName(1), o: 5, e: 3 }),
      encodeCursor({ s: SCOPE, f: fileName(1), o: 5, e: lineEnd + 1 }),
      encodeCursor({ s: SCOPE, f: fileName(1), o: 5, e: 1e9 }),
      encodeCursor({ s: SCOPE, f: fileName(1), o: 5, e: -1 }),
      encodeCursor({ s: SCOPE, f: fileName(1), o: 1e9, e: 0 }), // a tail past the end
      encodeCursor({ s: SCOPE, f: fileName(1), o: 5, e: 8, x: 1 }),
    ];
    for (const cursor of bad) {
      await assert.rejects(readNodeLogs(dir, query({ cursor }), SCOPE), InvalidCursorError, cursor);
    }
    for (const scope of [
      'service:svc0000001:1',
      'service:svc0000002:0',
      'replicaSet:svc0000001:0',
    ]) {
      await assert.rejects(readNodeLogs(dir, query({ cursor: good }), scope), InvalidCursorError);
    }
    // Even without any log directory, a bad cursor is a bad cursor.
    await assert.rejects(
      readNodeLogs('/nonexistent', query({ cursor: 'x' }), SCOPE),
      InvalidCursorError,
    );
    // A hand-made cursor at a real boundary is as good as an issued one.
    const made = encodeCursor({ s: SCOPE, f: fileName(1), o: lineEnd + line(1).length });
    assert.deepEqual(
      (await readNodeLogs(dir, query({ cursor: made }), SCOPE)).entries,
      expected([0, 1]),
    );
  }),
);

test(
  'search matches the decoded message: quotes, backslashes, non-ASCII, not other fields',
  withDir(async (dir) => {
    const at = (s: number) => `2026-11-22 00:00:0${s}.000 UTC`;
    const rows = [
      {
        timestamp: at(1),
        error_severity: 'ERROR',
        message: 'relation "Ünïcode_Tab" does not exist',
      },
      {
        timestamp: at(2),
        error_severity: 'LOG',
        message: 'path C:\\data\ttab',
        statement: 'unique',
      },
      // Keys in another order than PostgreSQL's: still read, by the full parse.
      { error_severity: 'WARNING', message: 'unique key', timestamp: at(3) },
    ];
    writeFileSync(join(dir, fileName(1)), rows.map((r) => JSON.stringify(r) + '\n').join(''));
    const messages = async (over: Partial<LogQuery>) =>
      (await readNodeLogs(dir, query(over), SCOPE)).entries.map((e) => e.message);
    assert.deepEqual(await messages({ search: ['"ünïcode_tab"'] }), [rows[0]!.message]);
    assert.deepEqual(await messages({ search: ['c:\\data\tt'] }), [rows[1]!.message]);
    assert.deepEqual(await messages({ search: ['unique'] }), ['unique key']); // not the statement
    assert.deepEqual(await messages({ severities: ['warning'] }), ['unique key']);
    assert.deepEqual(await messages({ severities: ['ERROR', 'LOG'] }), [
      rows[1]!.message,
      rows[0]!.message,
    ]);
  }),
);
