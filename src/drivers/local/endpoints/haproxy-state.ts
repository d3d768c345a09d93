// The servers' states a host's HAProxy keeps across a reload (issue 22;
// docs/decisions.md "HA across hosts", Endpoints). HAProxy 2.6 takes every
// server as up from the moment it loads a configuration until its checks
// fail (`init-state` arrives in 3.x), so right after a reload `balance
// first` would send a client to the first server listed, often a standby.
// So before each reload (and each start) the agent writes the global
// `server-state-file` that the frontends which say
// `load-server-state-from-file global` (haproxy-patroni.ts) load:
//
// - a server the running worker checks, at the same address and ports as
//   the new configuration's, keeps its state as `show servers state`
//   reported it (the primary stays up, a standby down);
// - any other server (new, moved to another address or port, or all of
//   them when no worker answers) is written down, never checked: it takes
//   connections only once its first check passes (rise 1). Never the
//   running worker's line for a moved server: HAProxy would apply its old
//   address and ports over the configuration's.
//
// HAProxy matches a line to a server by backend and server name only
// (server_state.c, global file). A line carries the state alone (line(),
// below): the address, ports and TLS stay the configuration's.
// https://docs.haproxy.org/2.6/management.html#9.3-show%20servers%20state

import { isIPv6 } from 'node:net';

/** The header `show servers state` prints (version 1), which the file starts with. */
const HEADER = [
  '1',
  '# be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state srv_uweight srv_iweight srv_time_since_last_change srv_check_status srv_check_result srv_check_health srv_check_state srv_agent_state bk_f_forced_id srv_f_forced_id srv_fqdn srv_port srvrecord srv_use_ssl srv_check_port srv_check_addr srv_agent_addr srv_agent_port',
];

/** A server line of a frontend that loads its servers' states. */
export interface StatefulServer {
  backend: string;
  server: string;
  addr: string;
  port: number;
  /** The health check's port (`check port N`); 0 when it checks the server's own. */
  checkPort: number;
}

/**
 * The servers of the `listen` sections that load their states from the
 * global file, read from the configuration files Basin wrote (one or more
 * sections each).
 */
export function statefulServers(configs: readonly string[]): StatefulServer[] {
  const out: StatefulServer[] = [];
  for (const text of configs) {
    let backend: string | undefined;
    let stateful = false;
    let servers: StatefulServer[] = [];
    const flush = () => {
      if (backend !== undefined && stateful) out.push(...servers);
      servers = [];
      stateful = false;
    };
    for (const raw of text.split('\n')) {
      const words = raw.trim().split(/\s+/);
      if (/^(listen|backend|frontend|defaults|global)$/.test(words[0] ?? '') && !/^\s/.test(raw)) {
        flush();
        backend = words[0] === 'listen' || words[0] === 'backend' ? words[1] : undefined;
      } else if (words[0] === 'load-server-state-from-file') {
        stateful = words[1] === 'global';
      } else if (words[0] === 'server' && backend !== undefined && words.length >= 3) {
        const target = parseTarget(words[2] ?? '');
        if (!target) continue;
        const portAt = words.indexOf('port', 3);
        servers.push({
          backend,
          server: words[1] ?? '',
          ...target,
          checkPort: portAt > 0 ? Number(words[portAt + 1]) : 0,
        });
      }
    }
    flush();
  }
  return out;
}

/** `addr:port`, `[v6]:port`, `ipv4@…`/`ipv6@…`: the address as HAProxy prints it, and the port. */
function parseTarget(word: string): { addr: string; port: number } | undefined {
  const bare = word.replace(/^ipv[46]@/, '');
  const colon = bare.lastIndexOf(':');
  if (colon <= 0) return undefined;
  const port = Number(bare.slice(colon + 1));
  if (!Number.isInteger(port) || port <= 0) return undefined;
  return { addr: canonical(bare.slice(0, colon).replace(/^\[(.*)\]$/, '$1')), port };
}

/**
 * An IPv6 address in the compressed form HAProxy prints (inet_ntop); a
 * form that still differs only makes its server start down once.
 */
function canonical(addr: string): string {
  if (!isIPv6(addr)) return addr;
  try {
    return new URL(`http://[${addr}]/`).hostname.slice(1, -1);
  } catch {
    return addr;
  }
}

/**
 * The state file for the next worker: `dump` is the running worker's
 * `show servers state` ('' when none answered), `servers` the new
 * configuration's. Every server of `servers` has a line; nothing else.
 */
export function serverStateFile(dump: string, servers: readonly StatefulServer[]): string {
  const running = new Map<string, string[]>();
  for (const line of dump.split('\n')) {
    const f = line.trim().split(/\s+/);
    // v1 as 2.6 prints it: 4 ids and 21 fields (anything else is not kept).
    if (line.startsWith('#') || f.length !== 25) continue;
    running.set(`${f[1]} ${f[3]}`, f);
  }
  const lines = servers.map((s) => {
    const f = running.get(`${s.backend} ${s.server}`);
    const same =
      f !== undefined &&
      canonical(f[4] ?? '') === s.addr &&
      Number(f[18]) === s.port &&
      Number(f[21]) === s.checkPort;
    // srv_op_state … srv_agent_state as the running worker has them, or down and never checked.
    const state = same ? f.slice(5, 15) : DOWN;
    return line(s, state);
  });
  return [...HEADER, ...lines, ''].join('\n');
}

/**
 * srv_op_state … srv_agent_state of a server the running worker does not
 * check as configured now: stopped (SRV_ST_STOPPED), the configuration's
 * admin state, the default weight (the user weight applies only when the
 * configuration's matches), its check not run yet (HCHK_STATUS_INI, so
 * `show stat` says INI until it is: untilChecked), health 0, the
 * configuration's check and agent state.
 */
const DOWN = ['0', '0', '1', '1', '0', '1', '0', '0', '0', '0'];

/**
 * One line of the file, with the 20 fields that v1 requires and none of
 * the optional ones: HAProxy 2.6 applies srv_use_ssl to a server with an
 * SSL context (check-ssl makes one) by setting its and its check's
 * transport anew, so a 0 there (what `show servers state` prints for a
 * server whose traffic is plain TCP) turns the check's TLS off, and the
 * REST API refuses it. Without them, the configuration's check port and
 * address hold too. The address is "-" (init-addr's `last`: the
 * configuration's), the ids 0 (a global file is matched by names).
 */
function line(s: StatefulServer, state: readonly string[]): string {
  return ['0', s.backend, '0', s.server, '-', ...state, '0', '0', '-', String(s.port), '-'].join(
    ' ',
  );
}
