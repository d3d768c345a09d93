// `basin service ha|pooler|update-password|environment`, `basin replica-set …`
// and `basin vpc …` (peerings too), run in process against a Basin (sim)
// listening on a real port, through the typed client over HTTP: each
// command's outcome read back through the API, its --wait, and Basin's 4xx
// answers printed as message and code, exit 1.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { API_KEY } from '../helpers.js';
import { setup } from './cli-setup.js';

test('basin service ha, pooler, update-password and environment change the service', async (t) => {
  const s = await setup(t);
  await s.ok(['login', '--url', s.url, '--key', API_KEY]);
  const { service_id: id } = await s.okJson(['service', 'create', 'db', '--wait']);
  const get = () => s.okJson(['service', 'get', id]);

  const ha = await s.okJson([
    'service',
    'ha',
    id,
    '--replicas',
    '2',
    '--sync-replicas',
    '1',
    '--wait',
  ]);
  assert.equal(ha.status, 'READY');
  assert.deepEqual((await get()).ha_replicas, { replica_count: 2, sync_replica_count: 1 });
  assert.match(await s.ok(['service', 'get', id]), /\nHA REPLICAS\s+2 \(1 synchronous\)\n/);
  await s.ok(['service', 'ha', id, '--replicas', '0', '--wait']);
  assert.equal((await get()).ha_replicas.replica_count, 0);

  assert.equal((await get()).connection_pooler, undefined);
  assert.equal(
    (await s.ok(['service', 'pooler', 'enable', id])).trim(),
    'Connection pooler enabled.',
  );
  const pooled = await s.okJson(['service', 'pooler', 'disable', id, '--wait']);
  assert.equal(pooled.status, 'READY');
  assert.equal((await get()).connection_pooler, undefined);
  const enabled = await s.okJson(['service', 'pooler', 'enable', id, '--wait']);
  assert.equal(typeof enabled.connection_pooler.endpoint.port, 'number');
  assert.match(await s.ok(['service', 'get', id]), /\nPOOLER\s+\S+:\d+\n/);
  // Enabled twice: Basin's 409, its message and code, exit 1.
  const twice = await s.basin(['service', 'pooler', 'enable', id]);
  assert.equal(twice.code, 1);
  assert.equal(
    twice.stderr,
    `basin: The connection pooler of service ${id} is already enabled. (CONFLICT)\n`,
  );

  const generated = await s.okJson(['service', 'update-password', id, '--auto-generate']);
  assert.equal(generated.service_id, id);
  assert.match(generated.password, /^[\w-]{32}$/);
  assert.equal(
    await s.ok(['service', 'update-password', id, '--new-password', 'a-new-long-password-1']),
    `Updated the password of tsdbadmin on ${id}.\n`,
  );
  const fromEnv = await s.basin(['service', 'update-password', id, '--wait'], {
    env: { BASIN_NEW_PASSWORD: 'another-long-password-2' },
  });
  assert.equal(fromEnv.code, 0, fromEnv.stderr);
  const short = await s.basin(['service', 'update-password', id, '--new-password', 'x']);
  assert.equal(short.code, 1);
  assert.match(short.stderr, /^basin: .*password.* \(INVALID_REQUEST\)\n$/i);

  assert.equal((await get()).metadata.environment, 'DEV');
  assert.match(await s.ok(['service', 'environment', id, 'prod']), /\S/);
  assert.equal((await get()).metadata.environment, 'PROD');

  const missing = await s.basin(['service', 'ha', 'nosuchsvc0', '--replicas', '1']);
  assert.equal(missing.code, 1);
  assert.match(
    missing.stderr,
    /^basin: Service nosuchsvc0 not found in project \w+\. \(NOT_FOUND\)\n$/,
  );
});

test('basin replica-set drives every replica set operation', async (t) => {
  const s = await setup(t);
  await s.ok(['login', '--url', s.url, '--key', API_KEY]);
  const { service_id: id } = await s.okJson(['service', 'create', 'db', '--wait']);

  const made = await s.okJson([
    'replica-set',
    'create',
    id,
    '--name',
    'reports',
    '--nodes',
    '2',
    '--cpu',
    '1000',
    '--memory',
    '4',
    '--wait',
  ]);
  assert.equal(made.status, 'active');
  assert.equal(made.name, 'reports');
  assert.equal(made.nodes, 2);
  const rs = made.id as string;

  const list = await s.ok(['replica-set', 'list', id]);
  const [header, row] = list.trimEnd().split('\n');
  assert.match(header as string, /^ID\s+NAME\s+STATUS\s+NODES\s+SIZE\s+ENDPOINT\s+POOLER$/);
  assert.match(
    row as string,
    new RegExp(`^${rs}\\s+reports\\s+active\\s+2\\s+1000m/4GB\\s+\\S+:\\d+\\s+-$`),
  );
  assert.match(
    await s.ok(['replica-set', 'get', id, rs]),
    /^ID\s+\w+\nNAME\s+reports\nSTATUS\s+active\n/,
  );

  const resized = await s.okJson([
    'replica-set',
    'resize',
    id,
    rs,
    '--cpu',
    '2000',
    '--memory',
    '8',
    '--wait',
  ]);
  assert.deepEqual([resized.status, resized.cpu_millis, resized.memory_gbs], ['active', 2000, 8]);

  await s.ok(['replica-set', 'pooler', 'enable', id, rs]);
  const pooled = await s.okJson(['replica-set', 'get', id, rs]);
  assert.equal(typeof pooled.connection_pooler.endpoint.port, 'number');
  await s.ok(['replica-set', 'pooler', 'disable', id, rs]);
  assert.equal((await s.okJson(['replica-set', 'get', id, rs])).connection_pooler, undefined);

  await s.ok(['replica-set', 'environment', id, rs, 'PROD']);
  assert.equal((await s.okJson(['replica-set', 'get', id, rs])).metadata.environment, 'PROD');

  assert.deepEqual(await s.okJson(['replica-set', 'delete', id, rs, '--wait']), {
    id: rs,
    status: 'deleted',
  });
  assert.deepEqual(await s.okJson(['replica-set', 'list', id]), []);
  const gone = await s.basin(['replica-set', 'get', id, rs]);
  assert.equal(gone.code, 1);
  assert.equal(
    gone.stderr,
    `basin: Read replica set ${rs} not found on service ${id}. (NOT_FOUND)\n`,
  );
  const badSize = await s.basin([
    'replica-set',
    'create',
    id,
    '--name',
    'x',
    '--cpu',
    '3000',
    '--memory',
    '4',
  ]);
  assert.equal(badSize.code, 1);
  assert.match(badSize.stderr, /^basin: No size offers 3000m CPU.*\(INVALID_REQUEST\)\n$/s);
});

test('basin vpc drives VPCs, attachments and peerings', async (t) => {
  const s = await setup(t);
  await s.ok(['login', '--url', s.url, '--key', API_KEY]);
  const { service_id: id } = await s.okJson(['service', 'create', 'db', '--wait']);

  const vpc = await s.okJson([
    'vpc',
    'create',
    '--name',
    'private',
    '--cidr',
    '10.7.0.0/16',
    '--region',
    'us-east-1',
  ]);
  assert.deepEqual([vpc.name, vpc.cidr, vpc.region_code], ['private', '10.7.0.0/16', 'us-east-1']);
  const other = await s.okJson([
    'vpc',
    'create',
    '--name',
    'other',
    '--cidr',
    '10.8.0.0/16',
    '--region',
    'us-east-1',
  ]);
  const list = await s.ok(['vpc', 'list']);
  assert.match(list, /^ID\s+NAME\s+CIDR\s+REGION\n/);
  assert.match(list, new RegExp(`\\n${vpc.id}\\s+private\\s+10\\.7\\.0\\.0/16\\s+us-east-1\\n`));

  assert.equal((await s.okJson(['vpc', 'rename', vpc.id, 'private-eu'])).name, 'private-eu');
  assert.match(await s.ok(['vpc', 'get', vpc.id]), /\nNAME\s+private-eu\n/);

  const attached = await s.okJson(['vpc', 'attach', vpc.id, id, '--wait']);
  assert.equal(attached.status, 'READY');
  assert.equal(attached.vpc_endpoint.vpc_id, vpc.id);
  const busy = await s.basin(['vpc', 'delete', vpc.id]);
  assert.equal(busy.code, 1);
  assert.match(
    busy.stderr,
    /still has 1 service\(s\) attached; detach them first\. \(CONFLICT\)\n$/,
  );

  const peering = await s.okJson([
    'vpc',
    'peering',
    'create',
    vpc.id,
    '--peer-vpc-id',
    other.id,
    '--peer-account-id',
    s.b.projectId,
    '--peer-region',
    'us-east-1',
    '--wait',
  ]);
  assert.equal(peering.status, 'active');
  assert.equal(peering.peer_vpc_id, other.id);
  assert.match(
    await s.ok(['vpc', 'peering', 'list', vpc.id]),
    new RegExp(`\\n${peering.id}\\s+active\\s+${other.id}\\s`),
  );
  assert.equal((await s.okJson(['vpc', 'peering', 'get', vpc.id, peering.id])).id, peering.id);
  assert.equal(
    (await s.ok(['vpc', 'peering', 'delete', vpc.id, peering.id])).trim(),
    `Deleted ${peering.id}.`,
  );
  assert.deepEqual(await s.okJson(['vpc', 'peering', 'list', vpc.id]), []);

  const detached = await s.okJson(['vpc', 'detach', vpc.id, id, '--wait']);
  assert.equal(detached.vpc_endpoint, undefined);
  assert.deepEqual(await s.okJson(['vpc', 'delete', vpc.id]), { id: vpc.id, deleted: true });
  const gone = await s.basin(['vpc', 'get', vpc.id]);
  assert.equal(gone.code, 1);
  assert.match(gone.stderr, /^basin: VPC \w+ not found in project \w+\. \(NOT_FOUND\)\n$/);
  const badCidr = await s.basin([
    'vpc',
    'create',
    '--name',
    'x',
    '--cidr',
    'nowhere',
    '--region',
    'us-east-1',
  ]);
  assert.equal(badCidr.code, 1);
  assert.match(badCidr.stderr, /\(INVALID_REQUEST\)\n$/);
});

test('bad usage of the new commands is exit 2 with their usage; --help has an example', async (t) => {
  const s = await setup(t);
  const cases: [string[], RegExp, RegExp][] = [
    [
      ['service', 'ha', 'a'],
      /Give --replicas <count>, --sync-replicas <count> or both/,
      /Usage: basin service ha/,
    ],
    [
      ['service', 'ha', 'a', '--replicas', 'two'],
      /--replicas must be a whole number/,
      /Usage: basin service ha/,
    ],
    [
      ['service', 'pooler', 'a'],
      /Unknown subcommand of service pooler: enable, disable/,
      /Usage: basin service/,
    ],
    [
      ['service', 'pooler'],
      /Missing subcommand of service pooler: enable, disable/,
      /Usage: basin service/,
    ],
    [['service', 'pooler', 'enable'], /Missing <service_id>/, /Usage: basin service pooler enable/],
    [
      ['service', 'update-password', 'a'],
      /Give the new password: --new-password <password>, BASIN_NEW_PASSWORD, or --auto-generate/,
      /Usage: basin service update-password/,
    ],
    [
      ['service', 'update-password', 'a', '--new-password', 'p', '--auto-generate'],
      /either --new-password or --auto-generate/,
      /Usage: basin service update-password/,
    ],
    [
      ['service', 'environment', 'a', 'staging'],
      /The environment must be DEV or PROD; got staging/,
      /Usage: basin service environment/,
    ],
    [
      ['replica-set', 'create', 'a', '--name', 'r'],
      /Give --name <name>, --cpu <millicores> and --memory <gigabytes>/,
      /Usage: basin replica-set create/,
    ],
    [['replica-set', 'get', 'a'], /Missing <replica_set_id>/, /Usage: basin replica-set get/],
    [
      ['replica-set', 'list', 'a', '--output', 'yaml'],
      /--output must be table or json/,
      /Usage: basin replica-set list/,
    ],
    [
      ['vpc', 'create', '--name', 'v'],
      /Give --name <name>, --cidr <cidr> and --region <region_code>/,
      /Usage: basin vpc create/,
    ],
    [
      ['vpc', 'peering', 'create', 'v'],
      /Give --peer-vpc-id <id>, --peer-account-id <id> and --peer-region/,
      /Usage: basin vpc peering create/,
    ],
    [['vpc', 'peering', 'get', 'v'], /Missing <peering_id>/, /Usage: basin vpc peering get/],
    [
      ['vpc', 'rename', 'v', 'n', '--wait'],
      /basin vpc rename takes no --wait/,
      /Usage: basin vpc rename/,
    ],
  ];
  for (const [argv, message, usage] of cases) {
    const r = await s.basin(argv);
    assert.equal(r.code, 2, `basin ${argv.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, message, argv.join(' '));
    assert.match(r.stderr, usage, argv.join(' '));
  }
  for (const [argv, example] of [
    [['service', 'ha', '--help'], /Examples:\n {2}basin service ha d1k5vk7hf2 --replicas 2/],
    [
      ['service', 'pooler', 'enable', '--help'],
      /Examples:\n {2}basin service pooler enable d1k5vk7hf2 --wait/,
    ],
    [
      ['replica-set', '--help'],
      /Usage: basin replica-set <create\|list\|get\|resize\|delete\|pooler\|environment>/,
    ],
    [
      ['vpc', 'peering', 'delete', '--help'],
      /Usage: basin vpc peering delete <vpc_id> <peering_id>/,
    ],
    [['vpc', '--help'], /basin vpc attach v7q2m4n8p1 d1k5vk7hf2 --wait/],
  ] as [string[], RegExp][]) {
    const r = await s.basin(argv);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, example, argv.join(' '));
  }
});
