// Where a deleted service's files are looked for (uids.ts ownedFiles): every
// directory its user could have written to, not other users' private ones.
import assert from 'node:assert/strict';
import { chmodSync, chownSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { ownedFiles, ownsFiles } from '../../src/drivers/local/host/uids.js';

// Uids no user has (chown takes any number, as root).
const U = 2_999_991;
const V = 2_999_992;

test("a user's files are found where it could write; another user's private directory is not entered", async (t) => {
  const top = mkdtempSync(join(tmpdir(), 'owned-files-'));
  t.after(() => rmSync(top, { recursive: true, force: true }));
  const dir = (path: string, uid: number, mode: number) => {
    mkdirSync(join(top, path));
    chownSync(join(top, path), uid, uid);
    chmodSync(join(top, path), mode);
  };
  const file = (path: string, uid: number) => {
    writeFileSync(join(top, path), 'x');
    chownSync(join(top, path), uid, uid);
  };
  // Root's directories are entered (Basin's own, above the services').
  dir('root', 0, 0o700);
  file('root/u-file', U);
  // The user's own directory: it stands for what is in it.
  dir('mine', U, 0o700);
  file('mine/a', U);
  file('mine/b', U);
  // Another user's directory anyone may write to: entered.
  dir('open', V, 0o1777);
  file('open/u-file', U);
  // Another user's private directory (another service's data): not entered.
  dir('private', V, 0o700);
  file('private/u-file', U);
  file('v-file', V);
  // A name with a newline is one file, not two paths.
  file('two\nlines', U);

  const found = (await ownedFiles(U, [top])).sort();
  assert.deepEqual(
    found,
    ['mine', 'open/u-file', 'root/u-file', 'two\nlines'].map((p) => join(top, p)),
  );
  assert.equal(await ownsFiles(U, [top]), true);
  assert.equal(await ownsFiles(2_999_993, [top]), false);
  // find fails on one corner (it says so on stderr) and goes on: what it
  // found still counts, the first file too (a CI run once lost it, glued
  // to the error message, and gave a new user the uid of a stray file).
  const gone = join(top, 'not-there');
  assert.equal(await ownsFiles(U, [gone, top]), true);
  assert.deepEqual((await ownedFiles(U, [gone, join(top, 'mine')])).sort(), [join(top, 'mine')]);
});
