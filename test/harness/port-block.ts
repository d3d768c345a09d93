// A block of TCP ports for one Basin installation of one test file.
//
// node --test runs two test files at once, and other checkouts on the same
// machine may run their suites too: ports chosen by formula (pid % n) or
// picked free and released collide sooner or later. A block is claimed by
// listening on its first port for as long as the test process lives, so the
// kernel itself keeps two claimants apart, and a crashed test process frees
// its blocks with nothing left to clean up. The rest of the block is the API
// port and the range Basin gives its databases. Blocks lie below the kernel's
// ephemeral range (32768-60999 on Linux), where outgoing connections would
// take ports at random, and above Basin's default database range
// (16000-19999), used by a Basin that developers run on the same machine.

import { createServer, type Server } from 'node:net';

const FIRST = 20_000;
const SIZE = 40;
const COUNT = 300; // 20000-31999

export interface PortBlock {
  /** The block's first port, held while the test process lives: no one else has the block. */
  claimed: number;
  /** The port Basin's API listens on. */
  apiPort: number;
  /** Ports for databases (BASIN_PORT_RANGE), `${min}-${max}`. */
  portRange: string;
  release(): Promise<void>;
}

function listen(port: number, host: string): Promise<Server | undefined> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(undefined));
    srv.listen({ port, host, exclusive: true }, () => {
      srv.unref(); // a claim must not keep the test process alive
      resolve(srv);
    });
  });
}

const close = (srv: Server) => new Promise<void>((resolve) => srv.close(() => resolve()));

/** Whether Basin could listen on `port` (nobody outside the claim scheme holds it). */
async function bindable(port: number): Promise<boolean> {
  const srv = await listen(port, '127.0.0.1');
  if (srv) await close(srv);
  return srv !== undefined;
}

/** Claims the next free block, starting at a place that depends on the pid to spread claimants. */
export async function claimPortBlock(): Promise<PortBlock> {
  const start = process.pid % COUNT;
  for (let i = 0; i < COUNT; i++) {
    const block = await claimBlock(FIRST + ((start + i) % COUNT) * SIZE);
    if (!block) continue;
    if (await bindable(block.apiPort)) return block;
    await block.release();
  }
  throw new Error(`no free block of ${SIZE} ports in ${FIRST}-${FIRST + COUNT * SIZE - 1}`);
}

/** The block that starts at `base`, if no living process holds it. */
export async function claimBlock(base: number): Promise<PortBlock | undefined> {
  const claim = await listen(base, '0.0.0.0');
  if (!claim) return undefined;
  return {
    claimed: base,
    apiPort: base + 1,
    portRange: `${base + 2}-${base + SIZE - 1}`,
    release: () => close(claim),
  };
}
