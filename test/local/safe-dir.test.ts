// Root reading and copying a tree a service's OS user can write
// (safe-dir.ts, safe-copy.ts): no link is followed in any component, not
// even one swapped in while Basin reads or copies; only directories and
// regular files of the expected owner are read; a copy holds the bytes and
// nothing else. The races are real: a process swaps a directory for a link
// to a "victim" tree (renameat2 RENAME_EXCHANGE, as fast as it can) while
// the reader works. No PostgreSQL needed.

import assert from 'node:assert/strict';
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  existsSync,
  linkSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { copyEntries } from '../../src/drivers/local/host/files/safe-copy.js';
import { readBeneath, SafeDir, withSafeDir } from '../../src/drivers/local/host/files/safe-dir.js';
import { UnsafeFileError } from '../../src/drivers/local/host/files/safe-fs.js';

const notRoot = process.getuid?.() !== 0 ? 'owner checks need root' : false;
/** The tenant: a uid that owns its tree, and the victim's too (so only the links are in the way). */
const TENANT = 4_242_424;

/** Swaps `a` and `b` (a directory and a link) as fast as it can, until killed. */
const SWAPPER = `
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
a, b = sys.argv[1].encode(), sys.argv[2].encode()
while True:
    libc.renameat2(-100, a, -100, b, 2)  # AT_FDCWD, RENAME_EXCHANGE
`;

/** As the tenant, which cannot write the victim's directories (0555): it swaps its own names only. */
function swapper(a: string, b: string): ChildProcess {
  const as = ['--reuid', String(TENANT), '--regid', String(TENANT), '--clear-groups'];
  return spawn('setpriv', [...as, '/usr/bin/python3', '-c', SWAPPER, a, b], { stdio: 'ignore' });
}

/** Every file under `dir` (relative path → content; a link → its target, never followed). */
function contents(dir: string, rel = ''): Map<string, string> {
  const out = new Map<string, string>();
  for (const name of readdirSync(join(dir, rel))) {
    const path = join(dir, rel, name);
    const st = lstatSync(path);
    if (st.isDirectory()) {
      for (const [k, v] of contents(dir, join(rel, name))) out.set(k, v);
    } else if (st.isSymbolicLink()) {
      out.set(join(rel, name), `-> ${readlinkSync(path)}`);
    } else {
      out.set(join(rel, name), readFileSync(path, 'utf8'));
    }
  }
  return out;
}

describe(
  'safe-dir and safe-copy: a tenant’s tree, read and copied by root',
  { skip: notRoot },
  () => {
    let dir: string;
    let n = 0;
    /** A fresh directory of root's to copy into. */
    const dest = () => {
      const d = join(dir, `dest-${n++}`);
      mkdirSync(d, { mode: 0o700 });
      return d;
    };
    /** A tree of `files` (relative path → content), all the tenant's. */
    function tree(name: string, files: Record<string, string>): string {
      const root = join(dir, name);
      mkdirSync(root);
      for (const [rel, content] of Object.entries(files)) {
        mkdirSync(join(root, rel, '..'), { recursive: true });
        writeFileSync(join(root, rel), content);
      }
      execFileSync('chown', ['-R', String(TENANT), root]);
      return root;
    }

    before(() => {
      dir = mkdtempSync(join(tmpdir(), 'basin-safe-dir-'));
      chmodSync(dir, 0o711);
    });
    after(() => rmSync(dir, { recursive: true, force: true }));

    test('components are opened one by one: a link in any of them is refused, as another owner', async () => {
      const victim = tree('victim1', { 'backup/b/backup.info': 'VICTIM' });
      const own = tree('own1', { 'backup/a/backup.info': 'own', 'backup/x/file': 'own' });
      symlinkSync(join(victim, 'backup'), join(own, 'linked'));
      symlinkSync(join(victim, 'backup', 'b'), join(own, 'backup', 'b'));
      chownSync(join(own, 'backup', 'x', 'file'), TENANT + 1, 0);
      assert.equal(await readBeneath(own, ['backup', 'a', 'backup.info'], TENANT, 100), 'own');
      for (const names of [
        ['linked', 'b', 'backup.info'],
        ['backup', 'b', 'backup.info'],
      ]) {
        await assert.rejects(readBeneath(own, names, TENANT, 100), (err: unknown) => {
          assert.ok(err instanceof UnsafeFileError, String(err));
          assert.match(err.message, /not a directory \(a file, or a symbolic link: not followed\)/);
          return true;
        });
      }
      await assert.rejects(readBeneath(own, ['backup', 'x', 'file'], TENANT, 100), /owned by uid/);
      await assert.rejects(
        readBeneath(own, ['backup', 'a', 'backup.info'], TENANT + 1, 100),
        /owned by uid/,
      );
      await assert.rejects(
        readBeneath(own, ['backup', '..', 'backup', 'a', 'backup.info'], TENANT, 100),
        /not a single name/,
      );
      await assert.rejects(readBeneath(own, ['missing', 'f'], TENANT, 100), { code: 'ENOENT' });
      // The root of a walk: its last component is not followed either.
      await assert.rejects(SafeDir.open(join(own, 'linked')), UnsafeFileError);
    });

    test('a directory swapped for a link after it was opened is still the one that was opened', async () => {
      const victim = tree('victim2', { 'data/f': 'VICTIM' });
      const own = tree('own2', { 'data/f': 'own' });
      await withSafeDir(own, TENANT, async (top) => {
        const data = await top.dir('data');
        try {
          execFileSync('mv', [join(own, 'data'), join(own, 'data.aside')]);
          symlinkSync(join(victim, 'data'), join(own, 'data'));
          assert.equal(await data.readSmall('f'), 'own', 'the directory held, not its name');
          await assert.rejects(top.dir('data'), UnsafeFileError);
          assert.deepEqual(await data.names(), ['f']);
        } finally {
          await data.close();
        }
      });
    });

    test('a copy: the bytes only, links kept where asked and refused elsewhere, special files refused', async () => {
      const own = tree('own3', {
        'base/1/1259': 'a relation',
        'global/pg_control': 'control',
        setuid: 'a shell, say',
      });
      chmodSync(join(own, 'setuid'), 0o4755);
      linkSync(join(own, 'base/1/1259'), join(own, 'base/1/hardlink'));
      mkdirSync(join(own, 'pg_tblspc'));
      symlinkSync('/somewhere/else', join(own, 'pg_tblspc', '16400'));
      execFileSync('chown', ['-R', '-h', String(TENANT), own]);
      const to = dest();
      await withSafeDir(own, TENANT, (d) =>
        copyEntries(d, ['base', 'global', 'setuid', 'pg_tblspc'], to, {
          owner: TENANT,
          keepLink: (rel) => /^pg_tblspc\/[^/]+$/.test(rel),
        }),
      );
      assert.deepEqual(Object.fromEntries(contents(to)), {
        'base/1/1259': 'a relation',
        'base/1/hardlink': 'a relation',
        'global/pg_control': 'control',
        'pg_tblspc/16400': '-> /somewhere/else',
        setuid: 'a shell, say',
      });
      for (const f of ['base/1/1259', 'setuid', 'global/pg_control']) {
        const st = statSync(join(to, f));
        assert.deepEqual([st.uid, st.mode & 0o7777], [0, 0o600], `${f}: root's, 0600, no setuid`);
      }
      assert.equal(statSync(join(to, 'base')).mode & 0o7777, 0o700);
      assert.notEqual(
        statSync(join(to, 'base/1/1259')).ino,
        statSync(join(to, 'base/1/hardlink')).ino,
      );

      // Refused, each naming what it found.
      const refused = async (name: string, why: RegExp) => {
        const target = dest();
        await assert.rejects(
          withSafeDir(own, TENANT, (d) => copyEntries(d, [name], target, { owner: TENANT })),
          (err: unknown) => {
            assert.ok(err instanceof UnsafeFileError, String(err));
            assert.match(err.message, why);
            assert.ok(err.message.includes(join(own, name)), err.message);
            return true;
          },
        );
      };
      symlinkSync('/etc', join(own, 'base', 'evil'));
      await refused('base', /base\/evil: a symbolic link \(not followed\)/);
      rmSync(join(own, 'base', 'evil'));
      await refused('pg_tblspc', /pg_tblspc\/16400: a symbolic link/);
      execFileSync('mkfifo', [join(own, 'fifo')]);
      chownSync(join(own, 'fifo'), TENANT, 0);
      await refused('fifo', /fifo: not a regular file or directory/);
      const server = createServer();
      await new Promise<void>((resolve) => server.listen(join(own, 'socket'), resolve));
      try {
        await refused('socket', /socket: not a regular file or directory/);
      } finally {
        server.close();
      }
      writeFileSync(join(own, 'foreign'), 'root planted this');
      await refused('foreign', /foreign: owned by uid 0, not 4242424/);
    });

    test('a walk under a swapping tenant reads its own files or nothing: never the link’s', async () => {
      const victim = tree('victim4', { f: 'VICTIM', 'sub/g': 'VICTIM' });
      // The tenant's uid, as the worst case (the owner check would stop
      // another's); not writable, so that the tenant's renames stay in its tree.
      execFileSync('chmod', ['-R', 'a-w', victim]);
      const own = tree('own4', { 'base/f': 'own', 'base/sub/g': 'own' });
      symlinkSync(victim, join(own, 'base.link'));
      // The tenant swaps base/ and a link to the victim, over and over; and,
      // one level down, base/sub/ and a link to the victim's sub/.
      symlinkSync(join(victim, 'sub'), join(own, 'base', 'sub.link'));
      execFileSync('chown', ['-R', '-h', String(TENANT), own]);
      const swappers = [
        swapper(join(own, 'base'), join(own, 'base.link')),
        swapper(join(own, 'base', 'sub'), join(own, 'base', 'sub.link')),
      ];
      const seen = { copied: 0, refused: 0, read: 0, readRefused: 0 };
      try {
        for (let i = 0; i < 20_000; i++) {
          const to = dest();
          try {
            await withSafeDir(own, TENANT, (d) => copyEntries(d, ['base'], to, { owner: TENANT }));
            // Whichever name the swapper had put where: its own files only.
            for (const [path, content] of contents(to)) assert.equal(content, 'own', path);
            seen.copied++;
          } catch (err) {
            if (
              !(err instanceof UnsafeFileError) &&
              (err as NodeJS.ErrnoException).code !== 'ENOENT'
            ) {
              throw err;
            }
            for (const [path, content] of contents(to)) assert.equal(content, 'own', path);
            seen.refused++;
          }
          rmSync(to, { recursive: true, force: true });
          try {
            assert.equal(await readBeneath(own, ['base', 'sub', 'g'], TENANT, 100), 'own');
            seen.read++;
          } catch (err) {
            if (
              !(err instanceof UnsafeFileError) &&
              (err as NodeJS.ErrnoException).code !== 'ENOENT'
            ) {
              throw err;
            }
            seen.readRefused++;
          }
          // Until the race was seen both ways, both times.
          if (i >= 200 && Object.values(seen).every((v) => v >= 5)) break;
        }
      } finally {
        for (const s of swappers) s.kill('SIGKILL');
      }
      assert.ok(
        Object.values(seen).every((v) => v >= 5),
        `the race ran both ways: ${JSON.stringify(seen)}`,
      );
      assert.ok(existsSync(join(victim, 'f')), 'the victim is untouched');
    });
  },
);
