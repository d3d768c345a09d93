// `npm run try-hosts`: an installation of several hosts on this one
// machine, to try what README "Several hosts" describes without several
// machines. The cluster tests' topology (cluster.ts, outside node:test:
// standalone.ts): four hosts as network namespaces on a bridge
// (10.231.50.11-14, the control plane at 10.231.50.1), a PostgreSQL store,
// `dist/main.js --driver hosts` with lost services restored on their own,
// and a `basin host run` agent per host: h1 the repository host, h2-h4
// database hosts in zones z2-z4, each running an etcd member. It prints
// how to reach it, then waits; Ctrl-C (or SIGTERM) removes everything it
// made: processes, namespaces, the store, OS users, files.

import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { joinWithRepositoryHost } from './cluster.js';
import { standaloneCluster } from './standalone.js';

const PREFIX = 'try';
/** Its subnet, 10.231.50.0/24: no test file uses it. */
const NET = 50;

const teardowns = new Set<() => Promise<void>>();
let stopping = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    console.log('\nRemoving everything…');
    void Promise.all([...teardowns].map((fn) => fn())).finally(() => process.exit(0));
  });
}
const onStop = (fn: () => Promise<void>) => {
  teardowns.add(fn);
  return () => teardowns.delete(fn);
};

console.log('Making four hosts as network namespaces, a store, a control plane and agents…');
const { c, close } = await standaloneCluster(
  { prefix: PREFIX, net: NET, hosts: 4, driver: 'hosts', args: ['--restore-lost-services', 'on'] },
  onStop,
);
try {
  await joinWithRepositoryHost(c, 4);
} catch (err) {
  await close(true);
  throw err;
}
const ca = join(c.inst.dataDir, 'services-ca.crt');
writeFileSync(ca, await c.cli('host', 'ca'));
const { b } = c;
const cli = `node dist/cli/basin.js --data-dir ${c.inst.dataDir} --store-url '${c.url}'`;
console.log(`
Basin with --driver hosts, on a PostgreSQL store, and four hosts on this machine:
  h1 ${c.address(1)} (repository host), h2-h4 ${c.address(2)}-${c.address(4)} (database hosts, zones z2-z4)

  export B=${b.url} P=${b.projectId} KEY=${b.bearerKey}
  curl -s -X POST $B/projects/$P/services -H "Authorization: Bearer $KEY" \\
    -H 'Content-Type: application/json' -d '{"name":"a","replica_count":2}'
  curl -s $B/projects/$P/services/<service_id> -H "Authorization: Bearer $KEY"   # READY, endpoint.host

  psql "host=<endpoint.host> port=<endpoint.port> user=tsdbadmin dbname=tsdb sslmode=verify-full sslrootcert=${ca}"

  ${cli} host list
  ${cli} host drain h2
  ip netns exec ${c.namespace(2)} sh    # inside host h2

Ctrl-C removes everything.`);
await new Promise(() => {
  // Until Ctrl-C.
});
