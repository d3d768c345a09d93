import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import {
  linkSync,
  mkdirSync,
  mkdtempSync,
  renameSync,
  rmSync,
  symlinkSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DiskUsageWalk, diskUsageBytes } from './disk-usage.js';

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

test('a walk goes a slice at a time and adds up to the same total', async () => {
  const root = mkdtempSync(join(tmpdir(), 'basin-du-'));
  try {
    for (let d = 0; d < 10; d++) {
      mkdirSync(join(root, `d${d}`, 'deeper'), { recursive: true });
      for (let f = 0; f < 30; f++) writeFileSync(join(root, `d${d}`, `f${f}`), 'x');
      writeFileSync(join(root, `d${d}`, 'deeper', 'g'), randomBytes(64 * 1024));
    }
    const whole = await diskUsageBytes(root);
    const walk = new DiskUsageWalk(root);
    let slices = 0;
    for (let before = 0; !(await walk.step(25)); before = walk.entries) {
      slices++;
      assert.ok(walk.entries - before < 25 + 8, `${walk.entries - before} entries in a slice`);
    }
    assert.equal(walk.entries, 10 * 33);
    assert.ok(slices >= 10, `${slices} slices`); // 330 entries, at most 32 a slice
    assert.equal(walk.bytes, whole);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('a directory swapped for a link during a walk is not followed', async () => {
  const root = mkdtempSync(join(tmpdir(), 'basin-du-'));
  try {
    const dir = join(root, 'pgdata');
    mkdirSync(join(dir, 'base'), { recursive: true });
    writeFileSync(join(dir, 'base', 'small'), 'x');
    mkdirSync(join(root, 'elsewhere'));
    writeFileSync(join(root, 'elsewhere', 'big'), randomBytes(4 * MiB));
    const walk = new DiskUsageWalk(dir);
    // The first slice lists pgdata (base is found); then base becomes a link to elsewhere.
    assert.equal(await walk.step(1), false);
    renameSync(join(dir, 'base'), join(root, 'old-base'));
    symlinkSync(join(root, 'elsewhere'), join(dir, 'base'));
    while (!(await walk.step(1)));
    assert.ok(walk.bytes < MiB, `${walk.bytes} bytes: the link was followed`);
    // Abandoning a walk half way closes what it opened; closing twice is fine.
    const abandoned = new DiskUsageWalk(root);
    await abandoned.step(1);
    await abandoned.close();
    await abandoned.close();
    assert.equal(await abandoned.step(10), true);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
