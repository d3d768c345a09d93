// The PgBouncers Basin runs, as /proc shows them: how the pooler tests see
// that one runs, that a restarted Basin adopted it (the same pid), and that
// it is gone once disabled or deleted.

import { readdirSync, readFileSync } from 'node:fs';

/** Live pgbouncer processes run with `ini` (a pooler's pgbouncer.ini). */
export function pgbouncers(ini: string): number[] {
  const pids: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const argv = readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0');
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const state = stat.slice(stat.lastIndexOf(')') + 2)[0];
      if (/pgbouncer$/.test(argv[0] ?? '') && argv.includes(ini) && state !== 'Z') {
        pids.push(Number(name));
      }
    } catch {
      // exited meanwhile
    }
  }
  return pids;
}
