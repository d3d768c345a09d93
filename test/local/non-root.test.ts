// Basin not running as root cannot make OS users: every cluster runs as
// Basin's own user, services are not isolated from each other, nodes run
// without a CPU budget or memory and process bounds (only root makes
// cgroups), and nothing is protected from the OOM killer (only root with
// CAP_SYS_RESOURCE lowers a score); the driver says each once at start
// (docs/security.md). Checked by running the driver as
// `nobody` in a child process.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { accessSync, chownSync, constants } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { readPasswd } from '../../src/drivers/local/host/os-user.js';
import { cleanUpDataDir, makeDataDir } from './helpers.js';

const execFileP = promisify(execFile);
const fixture = fileURLToPath(new URL('./fixtures/non-root-driver.ts', import.meta.url));
const nobody = readPasswd().find((p) => p.name === 'nobody');

/** The suite runs as root (README: `npm test`), so it can run the driver as nobody. */
function assertRunnable(): void {
  assert.equal(process.getuid?.(), 0, 'needs root, to run the driver as nobody');
  assert.ok(nobody, 'needs the user nobody');
  accessSync(fixture, constants.R_OK);
}

test(
  'not root: every cluster runs as Basin’s own user, with a warning at start',
  { timeout: 300_000 },
  async (t) => {
    assertRunnable();
    const dataDir = makeDataDir();
    t.after(() => cleanUpDataDir(dataDir));
    chownSync(dataDir, nobody!.uid, nobody!.gid);
    const { stdout } = await execFileP(process.execPath, ['--import', 'tsx', fixture, dataDir], {
      uid: nobody!.uid,
      gid: nobody!.gid,
      cwd: process.cwd(),
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: '/nonexistent' },
      timeout: 240_000,
    });
    const seen = JSON.parse(stdout.trim().split('\n').at(-1) as string);
    assert.equal(seen.programUser, 'nobody');
    assert.equal(seen.warnings.length, 3, JSON.stringify(seen.warnings));
    assert.ok(seen.warnings.some((w: string) => /services are NOT isolated/.test(w)));
    // Only root makes cgroups: said once, not per node.
    assert.ok(
      seen.warnings.some((w: string) =>
        /run without a CPU budget, a memory bound and a bound on their processes/.test(w),
      ),
    );
    // Only CAP_SYS_RESOURCE lowers an OOM score: the tenants' side is raised instead.
    assert.ok(seen.warnings.some((w: string) => /does not let Basin lower oom_score_adj/.test(w)));
  },
);
