import { createServer } from 'node:net';

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
