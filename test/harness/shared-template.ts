// One PostgreSQL template for a whole test run. Every local-driver
// installation builds its template at its first start (initdb, a set-up
// server, a sync: a few seconds, mostly I/O), and a run starts about a
// hundred installations. The template is the same in all of them (the same
// PostgreSQL, template user and contents: node/template.ts), so the runner
// (scripts/test.mjs) builds one with the product's own code before the
// files start, and each installation gets a copy in its data directory
// before Basin's first start, which Basin then finds current and keeps, as
// it keeps its own after a restart. What a test asserts about building
// the template (crash-leftovers: a kill mid-build) it gets by asking for
// its own (`ownTemplate`). The driver tests (test/local/, the driver
// contract) build theirs, except those that ask for a copy of the run's
// (`makeDataDir({ sharedTemplate: true })`): the ones whose subject is not
// the template, its build, its modes or its files.

import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Layout } from '../../src/drivers/local/layout.js';
import { pgInstall } from '../../src/drivers/local/host-check.js';
import { isRoot, resolveOsUser } from '../../src/drivers/local/host/os-user.js';
import { mkdirIn } from '../../src/drivers/local/node/node-files.js';
import { Template } from '../../src/drivers/local/node/template.js';
import { silentLogger } from '../../src/lib/logger.js';

/** The environment variable that hands the runner's template to the test files' processes. */
export const SHARED_TEMPLATE_ENV = 'BASIN_TEST_TEMPLATE';
const PREFIX = 'basin-test-template-';

/**
 * Builds the run's template; returns its directory (a Layout's templateDir)
 * and how to remove it. Only as root: otherwise the installations' template
 * user is whoever runs the tests, and each builds its own.
 */
export async function buildSharedTemplate(): Promise<{ dir: string; remove(): void } | undefined> {
  if (!isRoot()) return undefined;
  removeAbandonedTemplates();
  const parent = mkdtempSync(join(tmpdir(), `${PREFIX}${process.pid}-`));
  // The template user (postgres) runs initdb in it: it must cross the parent.
  chmodSync(parent, 0o711);
  const remove = () => rmSync(parent, { recursive: true, force: true });
  try {
    const layout = new Layout(parent);
    await mkdirIn(layout.root, 0o711);
    await mkdirIn(layout.socketsDir, 0o711);
    await new Template({
      layout,
      pg: pgInstall(),
      user: resolveOsUser(undefined),
      adminOsUsers: ['root', 'postgres'],
      privateTmp: undefined,
      log: silentLogger,
    }).ensure();
    return { dir: layout.templateDir, remove };
  } catch (err) {
    remove();
    throw err;
  }
}

/** The templates of runs that were killed (their runner's pid is gone). */
function removeAbandonedTemplates(): void {
  for (const name of readdirSync(tmpdir())) {
    const pid = name.startsWith(PREFIX) ? Number(name.slice(PREFIX.length).split('-')[0]) : NaN;
    if (Number.isInteger(pid) && !existsSync(`/proc/${pid}`)) {
      rmSync(join(tmpdir(), name), { recursive: true, force: true });
    }
  }
}

/**
 * Copies the run's template (if the runner made one) into the data directory
 * `dataDir` Basin (or a local driver test's driver) will use, made here if
 * it is not there yet.
 */
export function seedTemplate(dataDir: string): void {
  const from = process.env[SHARED_TEMPLATE_ENV];
  if (!from || !existsSync(from)) return;
  const layout = new Layout(dataDir);
  // The modes Basin gives them itself (lib/data-dir.ts, LocalDriver.prepareDataDir).
  if (!existsSync(dataDir)) mkdirSync(dataDir, { mode: 0o700 });
  mkdirSync(layout.root, { mode: 0o711 });
  chmodSync(layout.root, 0o711);
  // -a keeps the template user's ownership and the modes initdb gave.
  execFileSync('cp', ['-a', '--reflink=auto', from, layout.templateDir]);
}
