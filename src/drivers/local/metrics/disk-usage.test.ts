import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import {
  linkSync,
  mkdirSync,
  mkdtempSync,
  rmSync,
  symlinkSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { diskUsageBytes } from './disk-usage.js';

const MiB = 1024 * 1024;

test('disk usage counts allocated blocks of every file once, without following links', async () => {
  const root = mkdtempSync(join(tmpdir(), 'basin-du-'));
  try {
    const dir = join(root, 'pgdata');
    mkdirSync(join(dir, 'base', '1'), { recursive: true });
    writeFileSync(join(dir, 'a'), randomBytes(MiB));
    writeFileSync(join(dir, 'base', '1', 'b'), randomBytes(3 * MiB));
    writeFileSync(join(dir, 'base', 'small'), 'x'); // one block
    const base = 4 * MiB;
    const measured = await diskUsageBytes(dir);
    // Blocks round each file up; each directory takes a block or so.
    assert.ok(measured >= base && measured < base + 64 * 1024, String(measured));

    // A hard link counts once; a symbolic link to elsewhere is not followed;
    // a sparse file counts what is allocated, not its length.
    linkSync(join(dir, 'a'), join(dir, 'base', 'a-again'));
    writeFileSync(join(root, 'elsewhere'), randomBytes(2 * MiB));
    symlinkSync(join(root, 'elsewhere'), join(dir, 'link'));
    symlinkSync(root, join(dir, 'loop'));
    writeFileSync(join(dir, 'sparse'), '');
    truncateSync(join(dir, 'sparse'), 512 * MiB);
    const after = await diskUsageBytes(dir);
    assert.ok(after >= measured && after < measured + 64 * 1024, String(after - measured));

    assert.equal(await diskUsageBytes(join(root, 'missing')), 0);
    assert.ok((await diskUsageBytes(join(dir, 'a'))) >= MiB); // a file is its own size
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
