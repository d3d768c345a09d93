// Benchmark `cli-start` (issue 19): what starting Basin's processes costs in
// CPU (user + system time, the process and its threads), the median of
// BENCH_CLI_START_RUNS (20) runs each, against `node -e 0` (Node alone)
// measured in the same run. The test suite starts hundreds of these and is
// bound by CPU (README, "How long npm test takes"); a person waits for them.
//
//   - `basin --help`, `basin host list --help`: the CLI's own start, to its exit;
//   - `basin service list` against a running Basin (`--driver sim`), to its exit;
//   - `node dist/main.js --driver sim` on a fresh data directory, to its
//     first answered `GET /v1/projects` (bootstrap included);
//   - `basin mcp`, to its answer to an `initialize` request on stdin;
//   - `basin host run`'s modules: `import()` of the agent (agent/host-agent.js)
//     in a bare node, to its exit (an agent's start proper needs a control
//     plane and a host of its own: the cluster tests' namespaces).
//
// BENCH_CLI_START_ROOT measures the build (dist/) of another checkout
// instead of this one, e.g. a worktree of main, for a before and after.
// Target: `basin --help` within 0.1 s of CPU of `node -e 0`.

import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { BenchContext } from './bench-context.js';
import { envInt } from './env.js';
import { type BenchOutcome, fixed, heading, median, table, warn } from './report.js';

const KEY = 'bsn_clistartbench0123456789abcdef';
const TARGET_OVER_NODE_S = 0.1;

interface Case {
  name: string;
  /** One run's CPU seconds. */
  run(): Promise<number>;
}

export async function cliStart(ctx: BenchContext): Promise<BenchOutcome> {
  const runs = envInt('BENCH_CLI_START_RUNS', 20);
  const root = resolve(process.env.BENCH_CLI_START_ROOT ?? join(import.meta.dirname, '..'));
  const cli = join(root, 'dist', 'cli', 'basin.js');
  const main = join(root, 'dist', 'main.js');
  heading(`cli-start: CPU to start, median of ${runs} runs (${root})`);

  // One Basin for `service list` and `basin mcp` to talk to.
  const server = await startBasin(main, ctx.tmpDir);
  const login = { BASIN_URL: server.url, BASIN_API_KEY: KEY };
  try {
    const cases: Case[] = [
      { name: 'node -e 0', run: () => exitCpu([process.execPath, '-e', '0']) },
      { name: 'basin --help', run: () => exitCpu([process.execPath, cli, '--help']) },
      {
        name: 'basin host list --help',
        run: () => exitCpu([process.execPath, cli, 'host', 'list', '--help']),
      },
      {
        name: 'basin service list (sim)',
        run: () => exitCpu([process.execPath, cli, 'service', 'list'], login),
      },
      {
        name: 'main.js --driver sim, first GET',
        run: async () => {
          const b = await startBasin(main, ctx.tmpDir);
          await b.stop();
          return b.cpu;
        },
      },
      { name: 'basin mcp, initialize', run: () => mcpCpu(cli, login) },
      {
        name: "import() of basin host run's agent",
        run: () =>
          exitCpu([
            process.execPath,
            '--input-type=module',
            '-e',
            `await import(${JSON.stringify(join(root, 'dist', 'agent', 'host-agent.js'))})`,
          ]),
      },
    ];
    const results: { name: string; cpu: number[] }[] = cases.map((c) => ({
      name: c.name,
      cpu: [],
    }));
    // Interleaved rounds: a change of load falls on every case alike.
    for (let i = 0; i < runs; i++) {
      for (const [k, c] of cases.entries())
        (results[k] as { cpu: number[] }).cpu.push(await c.run());
    }
    const node = median((results[0] as { cpu: number[] }).cpu);
    table(
      ['process', 'median s', 'min s', 'max s', 'over node s'],
      results.map((r) => [
        r.name,
        fixed(median(r.cpu), 3),
        fixed(Math.min(...r.cpu), 3),
        fixed(Math.max(...r.cpu), 3),
        fixed(median(r.cpu) - node, 3),
      ]),
    );
    const help = median((results[1] as { cpu: number[] }).cpu) - node;
    const metTarget = help <= TARGET_OVER_NODE_S;
    if (!metTarget) warn(`basin --help costs ${fixed(help, 3)} s of CPU more than node -e 0`);
    const at = (name: string) => fixed(median(results.find((r) => r.name === name)?.cpu ?? []), 2);
    return {
      headline: `cli-start: CPU s basin --help ${at('basin --help')}, service list ${at('basin service list (sim)')}, main.js to first GET ${at('main.js --driver sim, first GET')}, mcp ${at('basin mcp, initialize')}, against node -e 0 ${fixed(node, 2)} (target: --help within ${TARGET_OVER_NODE_S} s of node)`,
      metTarget,
    };
  } finally {
    await server.stop();
  }
}

/** Runs `argv` to its exit; its CPU seconds, as bash's `times` reads them (getrusage of its children). */
function exitCpu(argv: readonly string[], env: Record<string, string> = {}): Promise<number> {
  return new Promise((done, fail) => {
    const child = spawn(
      'bash',
      ['-c', '"$@" >/dev/null; rc=$?; times; exit $rc', 'bash', ...argv],
      { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] },
    );
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d));
    child.once('error', fail);
    child.once('exit', (code) => {
      // `times`: the shell's user and system time, then its children's.
      const m = /(\d+)m([\d.]+)s (\d+)m([\d.]+)s\s*$/.exec(out.trim());
      if (code !== 0 || !m) {
        fail(new Error(`${argv.join(' ')} failed (${code}): ${out}`));
        return;
      }
      const [, um, us, sm, ss] = m.map(Number) as number[];
      done((um as number) * 60 + (us as number) + (sm as number) * 60 + (ss as number));
    });
  });
}

/** A live process's user + system seconds, all its threads (/proc/<pid>/stat, in clock ticks). */
function processCpu(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // After the command's name in parentheses: fields 3 onwards; utime and stime are 14 and 15.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((done) => srv.listen(0, '127.0.0.1', done));
  const { port } = srv.address() as { port: number };
  await new Promise<void>((done) => srv.close(() => done()));
  return port;
}

function exited(child: ChildProcess): Promise<void> {
  return child.exitCode !== null || child.signalCode !== null
    ? Promise.resolve()
    : new Promise((done) => child.once('exit', () => done()));
}

/** `dist/main.js --driver sim` on a fresh data directory; its CPU when it first answered a GET. */
async function startBasin(
  main: string,
  tmpDir: string,
): Promise<{ url: string; cpu: number; stop(): Promise<void> }> {
  const dataDir = mkdtempSync(join(tmpDir, 'cli-start-'));
  const port = await freePort();
  const child = spawn(
    process.execPath,
    [main, '--driver', 'sim', '--data-dir', dataDir, '--port', String(port)],
    { env: { ...process.env, BASIN_BOOTSTRAP_API_KEY: KEY }, stdio: 'ignore' },
  );
  const url = `http://127.0.0.1:${port}`;
  const stop = async () => {
    child.kill('SIGKILL');
    await exited(child);
    rmSync(dataDir, { recursive: true, force: true });
  };
  try {
    for (;;) {
      if (child.exitCode !== null) throw new Error(`Basin exited (${child.exitCode})`);
      const res = await fetch(`${url}/v1/projects`, {
        headers: { authorization: `Bearer ${KEY}` },
      }).catch(() => null);
      if (res) {
        await res.arrayBuffer();
        if (res.status !== 200) throw new Error(`GET /v1/projects answered ${res.status}`);
        return { url, cpu: processCpu(child.pid as number), stop };
      }
      await sleep(20);
    }
  } catch (err) {
    await stop();
    throw err;
  }
}

/** `basin mcp` on stdio; its CPU when it answered `initialize`. */
async function mcpCpu(cli: string, login: Record<string, string>): Promise<number> {
  const child = spawn(process.execPath, [cli, 'mcp'], {
    env: { ...process.env, ...login },
    stdio: ['pipe', 'pipe', 'ignore'],
  });
  try {
    const answered = new Promise<void>((done, fail) => {
      let out = '';
      child.stdout.on('data', (d: Buffer) => {
        out += d;
        if (out.includes('"id":1')) done();
      });
      child.once('exit', (code) => fail(new Error(`basin mcp exited (${code}): ${out}`)));
    });
    child.stdin.write(
      `${JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: {
          protocolVersion: '2025-06-18',
          capabilities: {},
          clientInfo: { name: 'cli-start', version: '0' },
        },
      })}\n`,
    );
    await answered;
    return processCpu(child.pid as number);
  } finally {
    child.kill('SIGKILL');
    await exited(child);
  }
}
