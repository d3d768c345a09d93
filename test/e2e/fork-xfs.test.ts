// A NOW fork on a file system with reflinks (issue 25): Basin's data
// directory on an XFS made for the test (mkfs.xfs -m reflink=1 on a sparse
// file, mounted by loop, gone afterwards). The fork holds exactly its
// parent's rows of the moment; its copy of the parent's table shares every
// block with the parent's (the copy cloned them: FICLONE, never a byte
// copy), until one side writes; and writes to either never reach the other.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { Layout } from '../../src/drivers/local/layout.js';
import type { BasinProcess } from '../harness/basin-api.js';
import { installation } from './basin-process.js';
import { pgQuery } from './clients.js';

const run = promisify(execFile);

interface Svc {
  id: string;
  port: number;
  password: string;
}

/** An XFS with reflinks on a loop device, mounted at the returned directory (removeXfs takes it away). */
async function reflinkXfs(): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'basin-xfs-'));
  const image = join(dir, 'xfs.img');
  const mount = join(dir, 'mnt');
  await run('truncate', ['-s', '4G', image]);
  await run('mkfs.xfs', ['-q', '-m', 'reflink=1', image]);
  await run('mkdir', [mount]);
  await run('mount', ['-o', 'loop', image, mount]);
  await run('chmod', ['711', dir, mount]);
  return mount;
}

/** Removes what reflinkXfs made (its loop device goes with the unmount). */
async function removeXfs(mount: string): Promise<void> {
  await run('umount', [mount]).catch(() => run('umount', ['-l', mount]));
  rmSync(join(mount, '..'), { recursive: true, force: true });
}

/** Bytes of `file`'s extents, and how many of them are shared with another file (filefrag's `shared` flag). */
async function extents(file: string): Promise<{ total: number; shared: number }> {
  const { stdout } = await run('filefrag', ['-v', '-b4096', file]);
  let total = 0;
  let shared = 0;
  // "   0:        0..    1023:      24..      1047:   1024:             shared"
  for (const line of stdout.split('\n')) {
    const m = /^\s*\d+:\s+\d+\.\.\s*\d+:\s+\d+\.\.\s*\d+:\s+(\d+):.*$/.exec(line);
    if (!m) continue;
    const bytes = Number(m[1]) * 4096;
    total += bytes;
    if (/\bshared\b/.test(line)) shared += bytes;
  }
  return { total, shared };
}

async function create(b: BasinProcess, name: string): Promise<Svc> {
  const res = await b.call('POST', b.servicePath(), {
    name,
    cpu_millis: 'shared',
    memory_gbs: 'shared',
    addons: [],
  });
  assert.equal(res.status, 202, res.text);
  const ready = await b.waitForStatus(res.body.service_id, 'READY', 180_000);
  return { id: ready.service_id, port: ready.endpoint.port, password: res.body.initial_password };
}

test(
  'a NOW fork on XFS with reflinks shares its blocks with its parent, and each side writes alone',
  { timeout: 600_000 },
  async (t) => {
    const mount = await reflinkXfs();
    const inst = await installation(t, {}, mount).catch(async (err: unknown) => {
      await removeXfs(mount);
      throw err;
    });
    // After the installation's own clean-up, which needs its files (hooks
    // run in the order they are registered).
    t.after(() => removeXfs(mount));
    const b = await inst.start();
    const layout = new Layout(inst.dataDir);

    const parent = await create(b, 'xfs-parent');
    // ~64 MB: 32,768 rows of ~2 KB of md5s (under the size PostgreSQL
    // toasts and compresses at).
    await pgQuery(
      parent.port,
      parent.password,
      `CREATE TABLE big AS SELECT g, repeat(md5(g::text), 60) AS pad FROM generate_series(1, 32768) g`,
    );
    // Vacuumed now, so that nothing rewrites the parent's pages after the
    // fork (hint bits, the visibility map: autovacuum would), which would
    // unshare them from the fork's.
    await pgQuery(parent.port, parent.password, 'VACUUM (FREEZE, ANALYZE) big');
    const table = (
      await pgQuery(parent.port, parent.password, "SELECT pg_relation_filepath('big') AS p")
    )[0].p as string;

    const res = await b.call('POST', `${b.servicePath(parent.id)}/forkService`, {
      fork_strategy: 'NOW',
      name: 'xfs-fork',
    });
    assert.equal(res.status, 202, res.text);
    const ready = await b.waitForStatus(res.body.service_id, 'READY', 180_000);
    const fork: Svc = {
      id: ready.service_id,
      port: ready.endpoint.port,
      password: res.body.initial_password,
    };

    // Its copy of the table is a clone: its blocks are shared (with the
    // parent's file, the only other owner of those blocks), checked before
    // anything reads it (a first read may set a hint bit and write a page).
    // A byte copy would share none.
    const forkFile = join(layout.pgdata({ id: fork.id, node: 0 }), table);
    const cloned = await extents(forkFile);
    assert.ok(cloned.total >= 50 * 1024 * 1024, `the table's file holds ${cloned.total} bytes`);
    assert.ok(
      cloned.shared >= 0.95 * cloned.total,
      `the fork's table shares ${cloned.shared} of its ${cloned.total} bytes`,
    );

    // Exactly the parent's rows.
    const count = async (s: Svc) =>
      (
        await pgQuery(s.port, s.password, 'SELECT count(*)::int AS n, sum(g)::bigint AS s FROM big')
      )[0];
    assert.deepEqual(await count(fork), await count(parent));
    assert.deepEqual(await count(fork), { n: 32768, s: String((32768 * 32769) / 2) });

    // Writes on each side reach only that side.
    await pgQuery(fork.port, fork.password, "UPDATE big SET pad = 'fork' WHERE g <= 100");
    await pgQuery(parent.port, parent.password, 'DELETE FROM big WHERE g > 32000');
    const forkPads = await pgQuery(
      fork.port,
      fork.password,
      "SELECT count(*)::int AS n FROM big WHERE pad = 'fork'",
    );
    assert.equal(forkPads[0].n, 100);
    assert.equal(
      (
        await pgQuery(
          parent.port,
          parent.password,
          "SELECT count(*)::int AS n FROM big WHERE pad = 'fork'",
        )
      )[0].n,
      0,
    );
    assert.equal((await count(fork)).n, 32768, "the parent's delete is not the fork's");
    assert.equal((await count(parent)).n, 32000);
    await b.stop();
  },
);
