// The test files run as JavaScript, not as TypeScript under tsx
// (docs/architecture.md §6): a copy of src/, test/, bench/ and scripts/ in which every
// .ts file has a .js beside it, made by esbuild in a second or two per run.
//
// Why: the suite is bound by CPU, and tsx's loader hooks cost every test
// process about a second of CPU to load its imports (a test file importing
// the API and the harness: 1.5 s under tsx, 0.55 s as JavaScript; a small
// unit file 0.35 s against 0.15 s), over some 230 processes per run.
//
// The copy is `.test-js/<runner's pid>/` in the checkout, so that Node finds
// node_modules/ above it as from the sources; one per run, so that two runs
// at once (a file run by hand beside the suite) never replace each other's
// files, and removed at the run's end (a killed run's, at the next run's
// start). Every file of the three folders is in it as a hard link (fixtures,
// topology.sh, the .ts files a test starts under tsx itself), its
// package.json a link to the real one ("type": "module" for the .js files,
// and test/harness/root.ts finds the checkout through it), and its dist/ a
// link to the build (what src/ looks for beside it). Source maps,
// linked, make a failure's stack name the .ts file and line.

import { build } from 'esbuild';
import { linkSync, mkdirSync, readdirSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { join, relative, sep } from 'node:path';

const PARENT = '.test-js';
const FOLDERS = ['src', 'test', 'bench', 'scripts'];

const alive = (pid) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return err.code === 'EPERM';
  }
};

/** Hard links of every file under `dir` into `out`, the .ts files' paths returned. */
function linkTree(dir, out) {
  mkdirSync(join(out, dir), { recursive: true });
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return linkTree(path, out);
    linkSync(path, join(out, path));
    return path.endsWith('.ts') ? [path] : [];
  });
}

/**
 * Makes this run's JavaScript copy (the working directory must be the
 * checkout's root) and returns where it is, how to go from a test file's
 * path to its copy's and back, and how to remove it.
 */
export async function transpileTests() {
  mkdirSync(PARENT, { recursive: true });
  for (const name of readdirSync(PARENT)) {
    if (!/^\d+$/.test(name) || !alive(Number(name))) {
      rmSync(join(PARENT, name), { recursive: true, force: true });
    }
  }
  const dir = join(PARENT, String(process.pid));
  // A killed run's, whose pid this run was given again.
  rmSync(dir, { recursive: true, force: true });
  const sources = FOLDERS.flatMap((folder) => linkTree(folder, dir));
  symlinkSync(join('..', '..', 'package.json'), join(dir, 'package.json'));
  // What src/ finds in the build beside it (dist/bpf/connect4.o: network/connect-redirect.ts).
  symlinkSync(join('..', '..', 'dist'), join(dir, 'dist'));
  await build({
    entryPoints: sources,
    outdir: dir,
    outbase: '.',
    format: 'esm',
    platform: 'node',
    target: 'node20',
    sourcemap: 'linked',
    sourcesContent: false,
    logLevel: 'warning',
  });
  const prefix = dir + sep;
  return {
    dir,
    /** `test/x.test.ts` → `.test-js/<pid>/test/x.test.js` */
    toJs: (file) => join(dir, file.replace(/\.ts$/, '.js')),
    /** The reverse, for a path relative to the checkout; other paths unchanged. */
    toTs: (file) => (file.startsWith(prefix) ? relative(dir, file).replace(/\.js$/, '.ts') : file),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
