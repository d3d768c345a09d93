// A listening Basin (sim) and `basin` run in process against it, with a
// config directory of its own: what the `basin service`, `replica-set` and
// `vpc` tests share.

import assert from 'node:assert/strict';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { runCli, type CliIo } from '../../src/cli/run-cli.js';
import { startBasin, tempDir } from '../helpers.js';

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** A listening Basin, and `basin` with its own config directory. */
export async function setup(t: TestContext, env: Record<string, string> = {}) {
  const b = await startBasin(t, { env });
  await b.basin.app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = b.basin.app.server.address() as { port: number };
  const url = `http://127.0.0.1:${port}`;
  const home = tempDir(t);
  const xdg = join(home, 'config');
  const execs: { file: string; args: readonly string[] }[] = [];
  const basin = async (
    argv: string[],
    extra: { env?: Record<string, string>; stdin?: string; exitCode?: number } = {},
  ): Promise<Run> => {
    let stdout = '';
    let stderr = '';
    const io: CliIo = {
      stdout: { write: (s: string) => (stdout += s) },
      stderr: { write: (s: string) => (stderr += s) },
      env: { HOME: home, XDG_CONFIG_HOME: xdg, ...extra.env },
      ...(extra.stdin === undefined ? {} : { readStdin: async () => extra.stdin as string }),
      exec: async (file, args) => {
        execs.push({ file, args });
        return extra.exitCode ?? 0;
      },
    };
    const code = await runCli(argv, io);
    return { code, stdout, stderr };
  };
  const ok = async (argv: string[]) => {
    const r = await basin(argv);
    assert.equal(r.code, 0, `basin ${argv.join(' ')}: ${r.stderr}`);
    return r.stdout;
  };
  const okJson = async (argv: string[]) => JSON.parse(await ok([...argv, '--output', 'json']));
  return { b, url, home, xdg, basin, ok, okJson, execs };
}
