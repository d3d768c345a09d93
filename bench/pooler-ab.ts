// A/B of PgBouncer settings in one run (a tool, not part of `npm run bench`):
// the machine is shared and its load drifts by 2x within minutes, so
// variants are only compared round by round, in a different order each
// round. Usage, as root from the checkout:
//
//   AB_VARIANTS='{"control":{},"nice-5":{"@autogroup_nice":"-5"},"pkt":{"pkt_buf":"16384"}}' \
//     npx tsx bench/pooler-ab.ts
//
// Basin (`dist/main.js`, local driver) runs one `shared` service with its
// pooler enabled (so that pg_hba.conf admits a pooler on the socket) but
// unused. Each variant is that pooler's pgbouncer.ini with some settings
// replaced (`[databases]`: appended to tsdb_transaction's line; `@autogroup_nice`:
// written to the variant's /proc/<pid>/autogroup; `@binary`: the pgbouncer
// run, /usr/sbin/pgbouncer by default; `@processes`: that many processes on
// the port, with so_reuseport, a socket directory each and peering, as
// Basin runs them, each pool's size divided among them), run detached as the
// service's user on a port of its own for its round only (its server
// connections would take the direct clients' slots). Each round: pgbench -S
// with 46 clients direct, then AB_CLIENTS (200) through each variant's
// tsdb_transaction, AB_SECONDS (5) each, AB_ROUNDS (8) rounds. Printed: tps
// per round, the median of each variant's per-round ratio to direct, and the
// CPU each side spent per 1000 transactions (pgbench, PgBouncer, the
// server's processes).

import { execFile, spawn } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { claimDataDir, LocalBasin, releaseDataDir } from './local-basin.js';
import { median } from './report.js';
import type { BenchContext } from './bench-context.js';

const run = promisify(execFile);
const VARIANTS = JSON.parse(process.env.AB_VARIANTS ?? '{"control":{}}') as Record<
  string,
  Record<string, string>
>;
const ROUNDS = Number(process.env.AB_ROUNDS ?? 8);
const SECONDS = Number(process.env.AB_SECONDS ?? 5);
const CLIENTS = Number(process.env.AB_CLIENTS ?? 200);
const DIRECT_CLIENTS = 46;

/** CPU seconds of a process, with its reaped children's when `children`. */
function cpuSeconds(pid: number, children = false): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat
      .slice(stat.lastIndexOf(')') + 2)
      .split(' ')
      .map(Number);
    // utime, stime, cutime, cstime: fields 14-17 of /proc/<pid>/stat.
    const own = (f[11] ?? 0) + (f[12] ?? 0);
    return (own + (children ? (f[13] ?? 0) + (f[14] ?? 0) : 0)) / 100;
  } catch {
    return 0;
  }
}

/** pgbench -S; its tps and the CPU seconds it used. */
async function pgbench(conn: string, clients: number, env: NodeJS.ProcessEnv) {
  const args = ['-n', '-S', '-M', 'simple', '-c', String(clients), '-j', '2'];
  const { stdout, stderr } = await run(
    '/usr/bin/time',
    ['-f', 'CPU %U %S', 'pgbench', ...args, '-T', String(SECONDS), conn],
    { env, maxBuffer: 1 << 24 },
  );
  const cpu = /CPU ([\d.]+) ([\d.]+)/.exec(stderr);
  return {
    tps: Number(/tps = ([\d.]+) \(without initial/.exec(stdout)?.[1] ?? NaN),
    cpu: Number(cpu?.[1] ?? 0) + Number(cpu?.[2] ?? 0),
  };
}

const accepts = (port: number) =>
  new Promise<boolean>((resolve) => {
    const s = createConnection({ host: '127.0.0.1', port });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });

/** `ini` with a variant's settings, for its process `i` of `n`. */
function variantIni(
  ini: string,
  dir: string,
  port: number,
  settings: Record<string, string>,
  i = 0,
  n = 1,
) {
  // Basin's own processes' peering and sockets are not the variant's; it
  // runs in the host's network, on loopback.
  let text = ini
    .replace(/\n\[peers\]\n[\s\S]*$/, '\n')
    .replace(/^(so_reuseport|peer_id) = .*\n/gm, '')
    .replace(/^listen_addr = .*$/m, 'listen_addr = 127.0.0.1')
    .replace(/^unix_socket_dir = .*$/m, `unix_socket_dir = ${join(dir, `s${i}`)}`)
    .replace(/^listen_port = .*$/m, `listen_port = ${port}`)
    .replace(/^auth_file = .*$/m, `auth_file = ${join(dir, 'users.txt')}`)
    .replace(/^auth_hba_file = .*$/m, `auth_hba_file = ${join(dir, 'hba.conf')}`);
  for (const [k, v] of Object.entries(settings)) {
    if (k.startsWith('@')) continue;
    if (k === '[databases]') {
      text = text.replace(/^(tsdb_transaction = .*)$/m, `$1 ${v}`);
      continue;
    }
    text = setting(text, k, v);
  }
  if (n > 1) {
    text = text.replace(
      /pool_size=(\d+)/g,
      (_, size: string) => `pool_size=${Math.max(1, Math.floor(Number(size) / n))}`,
    );
    text = setting(text, 'so_reuseport', '1');
    text = setting(text, 'unix_socket_dir', join(dir, `s${i}`));
    text = setting(text, 'peer_id', String(i + 1));
    const peers = Array.from(
      { length: n },
      (_, j) => `${j + 1} = host=${join(dir, `s${j}`)} port=${port}`,
    );
    text += `\n[peers]\n${peers.join('\n')}\n`;
  }
  return text;
}

function setting(text: string, k: string, v: string): string {
  const line = new RegExp(`^${k} = .*$`, 'm');
  return line.test(text)
    ? text.replace(line, `${k} = ${v}`)
    : text.replace('[pgbouncer]\n', `[pgbouncer]\n${k} = ${v}\n`);
}

async function main(): Promise<void> {
  const tmp = mkdtempSync(join(tmpdir(), 'pooler-ab-'));
  chmodSync(tmp, 0o711);
  const ctx = { tmpDir: tmp, settings: { basinNodeArgs: [] } } as unknown as BenchContext;
  const dataDir = await claimDataDir(ctx);
  const basin = await LocalBasin.start(dataDir, join(tmp, 'basin.log'));
  try {
    const { id, password } = await basin.createService({
      name: 'ab',
      cpu_millis: 'shared',
      memory_gbs: 'shared',
      addons: [],
    });
    await basin.waitReady(id, 20, 180_000);
    await basin.act(id, 'enablePooler');
    const port = (await basin.waitReady(id, 20, 60_000)).endpoint!.port;
    const poolerDir = join(dataDir, 'local/instances', id, 'pooler');
    const [ini, users, hba] = ['pgbouncer.ini', 'users.txt', 'hba.conf'].map((f) =>
      readFileSync(join(poolerDir, f), 'utf8'),
    ) as [string, string, string];
    const pgdata = join(dataDir, 'local/instances', id, '0/pgdata');
    const { uid, gid } = statSync(pgdata);
    const postmaster = Number(readFileSync(join(pgdata, 'postmaster.pid'), 'utf8').split('\n')[0]);
    const env = {
      ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('PG'))),
      PGPASSWORD: password,
      PGSSLMODE: 'require',
    };
    const direct = `host=127.0.0.1 port=${port} user=tsdbadmin dbname=tsdb`;
    await run('pgbench', ['-i', '-q', '-s', '1', direct], { env });
    const names = Object.keys(VARIANTS);
    const vport = port + 50;
    const tps: Record<string, number[]> = { direct: [] };
    const ratios: Record<string, number[]> = {};
    const cpu: Record<string, string[]> = { direct: [] };
    for (const n of names) {
      tps[n] = [];
      ratios[n] = [];
      cpu[n] = [];
    }
    const perKtx = (sec: number, t: number) => ((sec * 1000) / ((t * SECONDS) / 1000)).toFixed(0);
    for (let r = 0; r < ROUNDS; r++) {
      const pm = cpuSeconds(postmaster, true);
      const d = await pgbench(direct, DIRECT_CLIENTS, env);
      await sleep(300); // the backends exit and are reaped
      tps.direct!.push(d.tps);
      cpu.direct!.push(
        `pgbench ${perKtx(d.cpu, d.tps)} server ${perKtx(cpuSeconds(postmaster, true) - pm, d.tps)}`,
      );
      const order = [...names].sort(() => Math.random() - 0.5);
      for (const name of order) {
        const dir = join(tmp, `v-${names.indexOf(name)}`);
        mkdirSync(dir, { recursive: true, mode: 0o755 });
        const settings = VARIANTS[name]!;
        const n = Number(settings['@processes'] ?? 1);
        const binary = settings['@binary'] ?? '/usr/sbin/pgbouncer';
        for (const [f, text] of [
          ['users.txt', users],
          ['hba.conf', hba],
          ...Array.from(
            { length: n },
            (_, i) => [`pgbouncer-${i}.ini`, variantIni(ini, dir, vport, settings, i, n)] as const,
          ),
        ] as const) {
          writeFileSync(join(dir, f), text, { mode: 0o600 });
          chownSync(join(dir, f), uid, gid);
        }
        const procs = Array.from({ length: n }, (_, i) => {
          mkdirSync(join(dir, `s${i}`), { recursive: true, mode: 0o700 });
          chownSync(join(dir, `s${i}`), uid, gid);
          // setpriv execs PgBouncer (its pid is PgBouncer's); detached, as Basin runs it.
          return spawn(
            'setpriv',
            [`--reuid=${uid}`, `--regid=${gid}`, '--clear-groups', binary].concat(
              join(dir, `pgbouncer-${i}.ini`),
            ),
            { stdio: 'ignore', detached: true },
          );
        });
        const nice = settings['@autogroup_nice'];
        if (nice !== undefined)
          for (const q of procs) writeFileSync(`/proc/${q.pid}/autogroup`, nice);
        // Every process listening, not just the first; one that cannot
        // start ends the run (its finally cleans up).
        const since = Date.now();
        while (
          !(await accepts(vport)) ||
          !procs.every((_, i) => existsSync(join(dir, `s${i}`, `.s.PGSQL.${vport}`)))
        ) {
          if (Date.now() - since > 30_000) throw new Error(`variant ${name} did not start`);
          await sleep(20);
        }
        const pm0 = cpuSeconds(postmaster, true);
        const bouncers = () => procs.reduce((sum, q) => sum + cpuSeconds(q.pid!), 0);
        const bouncer0 = bouncers();
        const v = await pgbench(
          `host=127.0.0.1 port=${vport} user=tsdbadmin dbname=tsdb_transaction`,
          CLIENTS,
          env,
        );
        const bouncer = bouncers() - bouncer0;
        for (const q of procs) q.kill('SIGINT');
        while (await accepts(vport)) await sleep(20);
        await sleep(300);
        tps[name]!.push(v.tps);
        ratios[name]!.push(v.tps / d.tps);
        cpu[name]!.push(
          `pgbench ${perKtx(v.cpu, v.tps)} pgbouncer ${perKtx(bouncer, v.tps)} ` +
            `server ${perKtx(cpuSeconds(postmaster, true) - pm0, v.tps)}`,
        );
      }
      const line = Object.entries(tps).map(([k, v]) => `${k} ${Math.round(v.at(-1)!)}`);
      console.log(`round ${r + 1}: ${line.join(', ')}`);
    }
    // A round pgbench reported no tps for (it failed: the host stalled) counts for none.
    const finite = (xs: number[]) => xs.filter(Number.isFinite);
    for (const [k, v] of Object.entries(tps)) {
      const ratio = ratios[k] ? median(finite(ratios[k]!)).toFixed(2) : '1';
      console.log(
        `${k}: median ${Math.round(median(finite(v)))} tps, median of per-round ratios to direct ${ratio}`,
      );
      console.log(`  CPU ms per 1000 transactions: ${cpu[k]!.join(' | ')}`);
    }
    await basin.deleteAndWait(id);
  } finally {
    await basin.stop();
    await releaseDataDir(dataDir);
    rmSync(tmp, { recursive: true, force: true });
  }
}

await main();
