// What the control plane asks of one node of an HA service across hosts
// besides running it (docs/decisions.md, "HA across hosts": rolling
// restarts, switchovers, stop): each is one request of this host's agent to
// its own node, never a decision. Which settings the node's PostgreSQL runs
// with is read from PostgreSQL itself (pg_settings, over the socket as
// Basin's superuser), and compared with the node's Patroni YAML, so the
// control plane decides the next step of a rolling restart from what runs,
// with nothing remembered between steps (a kill -9 of either side loses
// nothing). The restart and the switchover are asked of Patroni's REST API
// with its password (read back from the node's YAML, root's), from this
// host's address, a member's, on the API's allowlist; Patroni decides.

import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parse } from 'yaml';
import { DONE, type Progress, wait } from '../../../domain/progress.js';
import { DriverError } from '../../driver.js';
import type { DriverContext } from '../context.js';
import { withAdmin } from '../node/admin.js';
import { exists } from '../node/node-files.js';
import { apiRequest } from './client.js';
import { CLUSTER_WIDE, RESTAPI_USER } from './patroni-config.js';
import { patroniStatus, stopPatroni } from './patroni.js';
import { nodeFiles, readerTls } from './patroni-node.js';

type Ctx = Pick<DriverContext, 'layout' | 'users' | 'publicHost'>;

/** A node as the control plane names it to its host: its index and its ports on this host. */
export interface NodePorts {
  index: number;
  port: number;
  apiPort: number;
}

/** How long Patroni may take to restart a node's PostgreSQL (POST /restart waits for it). */
const RESTART_MS = 100_000;

/** The node's YAML as far as these requests need it. */
interface NodeYaml {
  parameters: Record<string, string>;
  password: string;
}

async function readYaml(ctx: Ctx, local: string): Promise<NodeYaml | undefined> {
  const f = nodeFiles(ctx, local);
  if (!(await exists(f.config))) return undefined;
  const c = parse(await readFile(f.config, 'utf8')) as {
    postgresql?: { parameters?: Record<string, unknown> };
    restapi?: { authentication?: { password?: unknown } };
  };
  const parameters: Record<string, string> = {};
  for (const [k, v] of Object.entries(c.postgresql?.parameters ?? {})) parameters[k] = String(v);
  const password = c.restapi?.authentication?.password;
  if (typeof password !== 'string') return undefined;
  return { parameters, password };
}

const apiUrl = (ctx: Ctx, apiPort: number) =>
  `https://${ctx.publicHost.includes(':') ? `[${ctx.publicHost}]` : ctx.publicHost}:${apiPort}`;

/**
 * The settings this node's PostgreSQL runs with that differ from its YAML
 * and take a restart to change (pg_settings' `postmaster` context); null
 * while it does not run or does not answer (being restarted, copied).
 */
export async function staleSettings(
  ctx: Ctx,
  local: string,
  node: Pick<NodePorts, 'port'>,
): Promise<string[] | null> {
  const yaml = await readYaml(ctx, local);
  const user = ctx.users.lookup(local);
  if (!yaml || !user) return null;
  const f = nodeFiles(ctx, local);
  if (!(await patroniStatus(f, user)).up) return null;
  const names = Object.keys(yaml.parameters);
  try {
    const rows = await withAdmin(
      { socketDir: join(f.data, 'sock'), port: node.port, pgdata: f.pgdata },
      'postgres',
      async (s) =>
        (
          await s.query<RunningSetting>(
            `SELECT name, setting, unit, vartype FROM pg_catalog.pg_settings WHERE context = 'postmaster' AND name = ANY (ARRAY[${names.map((n) => s.escapeLiteral(n)).join(',')}]::text[])`,
          )
        ).rows,
    );
    return rows
      .filter((r) => {
        const wanted = yaml.parameters[r.name];
        return wanted !== undefined && !runsAsWanted(r, wanted);
      })
      .map((r) => r.name)
      .sort();
  } catch {
    return null;
  }
}

/** One row of pg_settings. */
export interface RunningSetting {
  name: string;
  setting: string;
  unit: string | null;
  vartype: string;
}

const MEMORY: Record<string, number> = { B: 1, kB: 1024, MB: 1024 ** 2, GB: 1024 ** 3, TB: 1024 ** 4 }; // prettier-ignore
const TIME: Record<string, number> = { us: 0.001, ms: 1, s: 1000, min: 60_000, h: 3_600_000, d: 86_400_000 }; // prettier-ignore

/** A value with its unit (`512MB`, `8kB`, `10s`) in bytes or milliseconds; undefined when not one. */
function scaled(value: string, defaultUnit: string | null): number | undefined {
  const m = /^\s*(-?\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$/.exec(value);
  if (!m) return undefined;
  const n = Number(m[1]);
  let unit = m[2] || defaultUnit || '';
  let times = 1;
  // pg_settings' units may carry a factor ("8kB", "16MB").
  const f = /^(\d+)([a-zA-Z]+)$/.exec(unit);
  if (f) {
    times = Number(f[1]);
    unit = f[2] as string;
  }
  const per = MEMORY[unit] ?? TIME[unit];
  return per === undefined ? (unit === '' ? n : undefined) : n * times * per;
}

/**
 * Whether a running setting is the wanted one. Sizes and times compare by
 * amount (`512MB` is `65536` of 8kB); words without case or quotes. The
 * settings every member must share (max_connections…) run on a standby at
 * the higher of the DCS's value and its primary's (Patroni takes
 * pg_controldata's when higher, or the standby would not start): they are
 * stale only below what is wanted, so a decrease waits for the next
 * restart rather than restart nodes in a loop.
 */
export function runsAsWanted(r: RunningSetting, wanted: string): boolean {
  if (r.vartype === 'integer' || r.vartype === 'real') {
    const now = scaled(r.setting, r.unit);
    const want = scaled(wanted, r.unit);
    if (now === undefined || want === undefined) return r.setting === wanted;
    if (CLUSTER_WIDE.includes(r.name) || r.unit === null) return now >= want;
    return now === want;
  }
  const word = (s: string) => s.replace(/["'\s]/g, '').toLowerCase();
  if (r.vartype === 'bool') {
    const b = (s: string) => ['on', 'true', 'yes', '1'].includes(word(s));
    return b(r.setting) === b(wanted);
  }
  return word(r.setting) === word(wanted);
}

/**
 * Restarts this node's PostgreSQL through its Patroni (POST /restart,
 * which waits for it) when it runs with stale settings; DONE when it does
 * not, or once Patroni answers that it restarted.
 */
export async function restartNode(ctx: Ctx, local: string, node: NodePorts): Promise<Progress> {
  const stale = await staleSettings(ctx, local, node);
  if (stale === null) return wait(1000, `node${node.index}'s PostgreSQL does not answer yet`);
  if (stale.length === 0) return DONE;
  const yaml = (await readYaml(ctx, local)) as NodeYaml;
  try {
    const a = await apiRequest(
      apiUrl(ctx, node.apiPort),
      'POST',
      '/restart',
      await readerTls(ctx),
      RESTART_MS,
      { body: {}, auth: { username: RESTAPI_USER, password: yaml.password } },
    );
    if (a.status !== 200) {
      return wait(2000, `Patroni answered ${a.status} to node${node.index}'s restart: ${text(a.body)}`); // prettier-ignore
    }
    return DONE;
  } catch (err) {
    return wait(2000, `node${node.index}'s restart: ${(err as Error).message}`);
  }
}

/**
 * Asks this node's Patroni, the leader's, to hand over to `candidate`
 * (POST /switchover). Patroni decides (a candidate that is not a
 * synchronous standby under synchronous_mode_strict is refused); DONE once
 * it answers that it switched over, a wait with its answer otherwise.
 */
export async function switchover(
  ctx: Ctx,
  local: string,
  node: NodePorts,
  candidate: string,
): Promise<Progress> {
  const yaml = await readYaml(ctx, local);
  if (!yaml) throw new DriverError(`Node ${node.index} is not on this host.`, false);
  try {
    const a = await apiRequest(
      apiUrl(ctx, node.apiPort),
      'POST',
      '/switchover',
      await readerTls(ctx),
      60_000,
      {
        body: { leader: `node${node.index}`, candidate },
        auth: { username: RESTAPI_USER, password: yaml.password },
      },
    );
    if (a.status === 200) return DONE;
    return wait(2000, `Patroni answered ${a.status} to the switchover: ${text(a.body)}`);
  } catch (err) {
    return wait(2000, `the switchover: ${(err as Error).message}`);
  }
}

/** Stops this node's Patroni (and with it its PostgreSQL); DONE once neither runs. */
export async function stopNode(ctx: Ctx, local: string): Promise<Progress> {
  const user = ctx.users.lookup(local);
  const f = nodeFiles(ctx, local);
  if (!user || !(await exists(f.config))) return DONE;
  await stopPatroni(f, user);
  return DONE;
}

const text = (body: unknown) =>
  (typeof body === 'string' ? body : JSON.stringify(body)).slice(0, 300);
