// A host's HAProxy frontend for an HA service whose nodes run under
// Patroni across hosts (docs/decisions.md, "HA across hosts"): every host
// runs one, so a client may use any host's address. Unlike the one-host
// frontend (haproxy.ts renderService), Basin enables no server: HAProxy
// asks each node's Patroni which is the primary, by Patroni's own health
// check (GET /primary: 200 on the running leader, 503 elsewhere, over the
// REST API's TLS with a client certificate, as the API requires), and
// routes to the one that answers 200. So a failover Patroni made is
// followed without Basin, even when the control plane is unreachable.
// TCP mode: the client's TLS session reaches the node, whose certificate
// names every address the endpoint is reached at (verify-full through any
// host). https://docs.haproxy.org/2.6/configuration.html#4-option%20httpchk

import { nodeName } from '../../../domain/service-nodes.js';
import { admissionLines, bindLines } from './haproxy.js';

export interface PatroniServer {
  index: number;
  /** Where the node's PostgreSQL is reached from this host (its host's address, or this host's own route to it). */
  host: string;
  port: number;
  /** Its Patroni REST API's port, at the same address. */
  apiPort: number;
}

export interface PatroniCheckTls {
  /** The CA the REST API's certificate must chain to. */
  ca: string;
  /** The client certificate and key (one PEM file) the REST API accepts (verify_client: required). */
  crt: string;
}

/**
 * One HA service's frontend on a host: every node a server, each checked
 * with `GET /primary` on its REST API over TLS (certificate verified, a
 * client certificate shown); only the node that answers 200 is up, so
 * `balance first` has one server to pick, after a reload too (the states
 * are kept across it: haproxy-state.ts). A node marked down has its
 * sessions cut (a demoted primary must keep no client). No retry: a
 * client retries at once, and by then the check has moved on.
 */
export function renderPatroniService(
  id: string,
  port: number,
  servers: readonly PatroniServer[],
  listenAddresses: string,
  admitted: readonly string[],
  tls: PatroniCheckTls,
): string {
  const sorted = [...servers].sort((a, b) => a.index - b.index);
  return [
    `# ${id}: written by Basin; edits are overwritten.`,
    `listen svc_${id}`,
    ...bindLines(port, listenAddresses),
    '    mode tcp',
    ...admissionLines(admitted),
    '    balance first',
    '    option tcpka',
    '    retries 0',
    // HAProxy 2.6 takes a server as up until its checks fail: the states
    // checked before a reload are kept, and a server not checked yet starts
    // down (haproxy-state.ts), so `balance first` never picks a standby
    // listed first in the moment after a reload.
    '    load-server-state-from-file global',
    '    option httpchk',
    '    http-check send meth GET uri /primary ver HTTP/1.1 hdr Host basin',
    '    http-check expect status 200',
    // A check answered within a second, every second; two failures mark a
    // node down (a leader that lost its lock answers 503 at once), one
    // success up.
    `    default-server inter 1s fastinter 500ms downinter 1s fall 2 rise 1 on-marked-down shutdown-sessions check-ssl verify required ca-file ${tls.ca} crt ${tls.crt}`,
    ...sorted.map(
      (s) => `    server ${nodeName(s.index)} ${s.host}:${s.port} check port ${s.apiPort}`,
    ),
    '',
  ].join('\n');
}
