import { connect, createServer } from 'node:net';

/**
 * Whether nothing listens on `port` on any IPv4 or IPv6 address right now.
 * Basin checks before handing a port to a database, so a port some other
 * program holds is skipped instead of leaving a service that cannot start.
 */
export async function portIsFree(port: number): Promise<boolean> {
  for (const host of ['0.0.0.0', '::']) {
    const free = await new Promise<boolean>((resolve) => {
      const srv = createServer();
      srv.once('error', (err: NodeJS.ErrnoException) =>
        resolve(err.code === 'EAFNOSUPPORT' || err.code === 'EADDRNOTAVAIL'),
      );
      srv.listen({ port, host, ipv6Only: host === '::' }, () => srv.close(() => resolve(true)));
    });
    if (!free) return false;
  }
  return true;
}

/**
 * Whether something accepts a connection at `to` (TCP, or a Unix socket),
 * given up after `timeoutMs`. An address nobody answers yet (a namespace
 * whose link is not up, a port its firewall table does not let in yet)
 * drops the SYN, and the kernel would retry it for two minutes: the
 * caller's own deadline between probes would never come (a create stuck
 * in CONFIGURING for 120 s, a pooler "not accepting" for 60 s, both in
 * full runs at load). A probe that times out is a no; the caller probes
 * again.
 */
export function accepts(
  to: { host: string; port: number } | { path: string },
  timeoutMs = PROBE_MS,
): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(to);
    socket.setTimeout(timeoutMs, () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** How long one probe of accepts waits for an answer. */
const PROBE_MS = 1000;
