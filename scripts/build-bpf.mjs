// Builds the local driver's eBPF program (src/drivers/local/network/
// connect4.bpf.c) into dist/bpf/connect4.o, with clang's BPF target, as
// part of `npm run build`. Without clang (or on a big-endian host) nothing
// is built and Basin does without it: local clients then reach services
// through nftables' translation, as remote ones do (connect-redirect.ts).

import { spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { endianness } from 'node:os';

const SOURCE = 'src/drivers/local/network/connect4.bpf.c';
const OUT = 'dist/bpf/connect4.o';

/** The first clang on PATH: `clang`, else a versioned one (Debian installs clang-14 with PostgreSQL's server headers). */
function findClang() {
  for (const name of ['clang', ...Array.from({ length: 8 }, (_, i) => `clang-${21 - i}`)]) {
    if (spawnSync(name, ['--version'], { stdio: 'ignore' }).status === 0) return name;
  }
  return undefined;
}

const clang = endianness() === 'LE' ? findClang() : undefined;
if (!clang) {
  console.log(`build-bpf: no clang here: ${OUT} not built (local clients go through NAT)`);
} else {
  // <linux/bpf.h> includes <asm/types.h>, which Debian keeps in the multiarch directory.
  const arch = spawnSync('uname', ['-m'], { encoding: 'utf8' }).stdout.trim();
  mkdirSync('dist/bpf', { recursive: true });
  const res = spawnSync(
    clang,
    ['-O2', '-g', '-target', 'bpf', `-I/usr/include/${arch}-linux-gnu`, '-c', SOURCE, '-o', OUT],
    { stdio: 'inherit' },
  );
  // Not fatal: Basin runs without it (and says so at start).
  if (res.status !== 0)
    console.log(`build-bpf: ${clang} failed: ${OUT} not built (local clients go through NAT)`);
}
