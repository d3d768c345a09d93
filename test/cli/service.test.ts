// `basin login` and `basin service …`, run in process against a Basin (sim)
// listening on a real port: the commands go through the typed client over
// HTTP, as they would against any Basin. The README walkthrough through the
// shipped dist/cli/basin.js is test/e2e/cli-service-walkthrough.test.ts.

import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { API_KEY, tempDir } from '../helpers.js';
import { setup } from './cli-setup.js';

test('basin login checks the key and saves it 0600 in $XDG_CONFIG_HOME/basin, whatever the umask', async (t) => {
  const s = await setup(t);
  const old = process.umask(0);
  t.after(() => process.umask(old));

  const refused = await s.basin(['login', '--url', s.url, '--key', 'bsn_wrong-key-of-nobody']);
  assert.equal(refused.code, 1);
  assert.match(refused.stderr, /^basin: The credentials are not valid/);
  assert.throws(() => statSync(join(s.xdg, 'basin', 'config.json')), /ENOENT/);

  const out = await s.ok(['login', '--url', `${s.url}/v1`, '--key', API_KEY]);
  assert.match(
    out,
    new RegExp(`Logged in to ${s.url} as credential bootstrap .*project ${s.b.projectId}`),
  );
  const file = join(s.xdg, 'basin', 'config.json');
  assert.equal(statSync(file).mode & 0o777, 0o600);
  assert.equal(statSync(join(s.xdg, 'basin')).mode & 0o777, 0o700);
  assert.deepEqual(JSON.parse(readFileSync(file, 'utf8')), {
    url: s.url,
    api_key: API_KEY,
    project_id: s.b.projectId,
  });

  // The key on standard input; without XDG_CONFIG_HOME, ~/.config/basin.
  const piped = await s.basin(['login', '--url', s.url], {
    stdin: `${API_KEY}\n`,
    env: { XDG_CONFIG_HOME: '' },
  });
  assert.equal(piped.code, 0, piped.stderr);
  const home = join(s.home, '.config', 'basin', 'config.json');
  assert.equal(statSync(home).mode & 0o777, 0o600);
  assert.equal(JSON.parse(readFileSync(home, 'utf8')).api_key, API_KEY);

  const usage: [string[], RegExp][] = [
    [['login', '--key', API_KEY], /Give the address of Basin: --url <url>/],
    [['login', '--url', 'localhost:8080', '--key', API_KEY], /must start with http/],
    [['login', '--url', s.url], /Give a key: --key <key>, BASIN_API_KEY, or on standard input/],
    [['login', 'extra', '--url', s.url], /Unexpected argument extra/],
  ];
  for (const [argv, message] of usage) {
    const r = await s.basin(argv);
    assert.equal(r.code, 2, argv.join(' '));
    assert.match(r.stderr, message);
    assert.match(r.stderr, /Usage: basin login --url <url>/);
  }
  const other = await s.basin(['login', '--url', s.url, '--key', API_KEY, '--project', 'nope']);
  assert.equal(other.code, 1);
  assert.match(other.stderr, /does not see project nope/);
});

test('basin service drives a service through its life over HTTP', async (t) => {
  const s = await setup(t);
  const notYet = await s.basin(['service', 'list']);
  assert.equal(notYet.code, 1);
  assert.match(notYet.stderr, /^basin: Not logged in: run `basin login --url <url>`/);
  await s.ok(['login', '--url', s.url, '--key', API_KEY]);

  const created = await s.okJson([
    'service',
    'create',
    'metrics',
    '--cpu',
    '1000',
    '--memory',
    '4',
    '--wait',
  ]);
  assert.equal(created.status, 'READY');
  assert.equal(created.name, 'metrics');
  assert.equal(typeof created.initial_password, 'string', 'the password, shown once');
  assert.deepEqual(created.resources[0].spec, {
    cpu_millis: 1000,
    memory_gbs: 4,
    volume_type: 'sim',
  });
  const id = created.service_id as string;

  const list = await s.ok(['service', 'list']);
  const [header, row] = list.trimEnd().split('\n');
  assert.match(header as string, /^ID\s+NAME\s+STATUS\s+TYPE\s+REGION\s+SIZE\s+ENDPOINT$/);
  assert.match(
    row as string,
    new RegExp(
      `^${id}\\s+metrics\\s+READY\\s+TIMESERIESDB\\s+us-east-1\\s+1000m/4GB\\s+localhost:\\d+$`,
    ),
  );
  assert.match(await s.ok(['service', 'get', id]), /^ID\s+\w+\nNAME\s+metrics\nSTATUS\s+READY\n/);
  assert.equal((await s.okJson(['service', 'list']))[0].service_id, id);

  assert.equal((await s.okJson(['service', 'rename', id, 'metrics-eu'])).name, 'metrics-eu');
  assert.equal((await s.okJson(['service', 'stop', id, '--wait'])).status, 'PAUSED');
  assert.equal((await s.okJson(['service', 'start', id, '--wait'])).status, 'READY');
  const resized = await s.okJson([
    'service',
    'resize',
    id,
    '--cpu',
    '2000',
    '--memory',
    '8',
    '--wait',
  ]);
  assert.deepEqual(resized.resources[0].spec, {
    cpu_millis: 2000,
    memory_gbs: 8,
    volume_type: 'sim',
  });

  const fork = await s.okJson(['service', 'fork', id, '--name', 'copy', '--wait']);
  assert.equal(fork.status, 'READY');
  assert.equal(fork.forked_from.service_id, id);
  assert.equal(typeof fork.initial_password, 'string');

  const logs = await s.okJson(['service', 'logs', id, '--limit', '5']);
  assert.equal(logs.length, 5);
  for (const e of logs)
    assert.deepEqual(Object.keys(e).sort(), ['message', 'severity', 'source', 'timestamp']);
  // The sim's lines are the database's; Basin wrote nothing about a service that never failed.
  assert.ok(logs.every((e: { source: string }) => e.source === 'database'));
  assert.deepEqual(await s.okJson(['service', 'logs', id, '--source', 'basin']), []);
  const errors = await s.okJson([
    'service',
    'logs',
    id,
    '--severity',
    'ERROR',
    '--severity',
    'FATAL',
    '--limit',
    '0',
  ]);
  for (const e of errors) assert.ok(['ERROR', 'FATAL'].includes(e.severity), e.severity);
  const text = await s.ok(['service', 'logs', id, '--limit', '3']);
  assert.equal(text.trimEnd().split('\n').length, 3);
  assert.match(text, /^\d{4}-\d\d-\d\dT\S+\s+[A-Z]+\s+\S/);

  assert.equal(
    (await s.ok(['service', 'delete', fork.service_id, '--wait'])).trim(),
    `Deleted ${fork.service_id}.`,
  );
  assert.deepEqual(await s.okJson(['service', 'delete', id, '--wait']), {
    service_id: id,
    status: 'DELETED',
  });
  assert.deepEqual(await s.okJson(['service', 'list']), []);

  // Failures are Basin's own one-line messages, exit 1.
  const missing = await s.basin(['service', 'get', id]);
  assert.equal(missing.code, 1);
  assert.equal(
    missing.stderr,
    `basin: Service ${id} not found in project ${s.b.projectId}. (NOT_FOUND)\n`,
  );
  const badSize = await s.basin(['service', 'create', 'x', '--cpu', '3000']);
  assert.equal(badSize.code, 1);
  assert.match(badSize.stderr, /^basin: No size offers 3000m CPU; choose one of/);
});

test('basin service list --type takes either name of time-series, whichever Basin answers', async (t) => {
  const s = await setup(t, { BASIN_SERVICE_TYPE_NAME: 'TIMESCALEDB' });
  await s.ok(['login', '--url', s.url, '--key', API_KEY]);
  const ts = await s.okJson(['service', 'create', 'ts', '--wait']);
  const pg = await s.okJson(['service', 'create', 'pg', '--addons', 'none', '--wait']);
  assert.equal(ts.service_type, 'TIMESCALEDB');
  const ids = async (type: string) =>
    (await s.okJson(['service', 'list', '--type', type])).map((x: any) => x.service_id);
  assert.deepEqual(await ids('TIMESCALEDB'), [ts.service_id]);
  assert.deepEqual(await ids('timeseriesdb'), [ts.service_id]);
  assert.deepEqual(await ids('POSTGRES'), [pg.service_id]);
  assert.deepEqual(await ids('VECTOR'), []);
  assert.match(await s.ok(['service', 'get', ts.service_id]), /\nTYPE\s+TIMESCALEDB\n/);
});

test('basin service: bad usage is exit 2 with the usage of the command', async (t) => {
  const s = await setup(t);
  const cases: [string[], RegExp][] = [
    [['service', 'list', '--output', 'yaml'], /--output must be table or json; got yaml/],
    [
      ['service', 'resize', 'abc', '--cpu', '1000'],
      /Give the new size: --cpu <millicores> --memory <gigabytes>/,
    ],
    [['service', 'get'], /Missing <service_id>/],
    [['service', 'get', 'a', '--', 'x'], /basin service get takes nothing after --/],
    [['service', 'logs', 'a', '--limit', 'many'], /--limit must be a whole number/],
    [['service', 'logs', 'a', '--source', 'tenant'], /--source must be basin or database/],
    [['service', 'create', 'x', '--replicas', 'two'], /--replicas must be a whole number/],
    [['service', 'list', '--wait'], /basin service list takes no --wait/],
    [['service', 'list', '--type', 'MYSQL'], /--type must be TIMESERIESDB \(or TIMESCALEDB\)/],
    [['service', 'frob'], /Unknown subcommand service frob/],
  ];
  for (const [argv, message] of cases) {
    const r = await s.basin(argv);
    assert.equal(r.code, 2, `basin ${argv.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, message);
    assert.match(r.stderr, /Usage: basin service/);
  }
});

test('BASIN_URL and BASIN_API_KEY stand in for a login; --project picks the project', async (t) => {
  const s = await setup(t);
  const env = { BASIN_URL: s.url, BASIN_API_KEY: API_KEY };
  const r = await s.basin(['service', 'list', '--output', 'json'], { env });
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout), []);
  const half = await s.basin(['service', 'list'], { env: { BASIN_URL: s.url } });
  assert.equal(half.code, 1);
  assert.match(half.stderr, /Set both BASIN_URL and BASIN_API_KEY, or neither/);
  const other = await s.basin(['service', 'list', '--project', 'otherproj0'], { env });
  assert.equal(other.code, 1);
  assert.match(other.stderr, /Project otherproj0 not found/);
});

test('basin service psql: verify-full with the CA it finds, require (and a warning) without; channel binding always', async (t) => {
  const s = await setup(t);
  await s.ok(['login', '--url', s.url, '--key', API_KEY]);
  const { service_id: id } = await s.okJson(['service', 'create', 'db', '--wait']);
  const port = (await s.okJson(['service', 'get', id])).endpoint.port;

  // No CA anywhere: it still connects, and says the server is not verified.
  const dataDir = join(tempDir(t), 'empty');
  const plain = await s.basin(['service', 'psql', id, '--data-dir', dataDir]);
  assert.equal(plain.code, 0, plain.stderr);
  assert.match(
    plain.stderr,
    /no CA certificate .* sslmode=require, which does not verify the server/,
  );
  assert.deepEqual(s.execs.at(-1), {
    file: 'psql',
    args: [
      `host=localhost port=${port} user=tsdbadmin dbname=tsdb sslmode=require channel_binding=require`,
    ],
  });

  // The local driver's CA in the data directory, found as the admin commands find it.
  const local = join(tempDir(t), 'data dir');
  mkdirSync(join(local, 'local', 'ca'), { recursive: true });
  writeFileSync(join(local, 'local', 'ca', 'ca.crt'), 'not checked here');
  const found = await s.basin(['service', 'psql', id, '--', '-c', 'SELECT 1'], {
    env: { BASIN_DATA_DIR: local },
    exitCode: 3,
  });
  assert.equal(found.code, 3, "psql's exit status");
  assert.equal(found.stderr, '');
  assert.deepEqual(s.execs.at(-1)?.args, [
    `host=localhost port=${port} user=tsdbadmin dbname=tsdb sslmode=verify-full sslrootcert='${join(local, 'local', 'ca', 'ca.crt')}' channel_binding=require`,
    '-c',
    'SELECT 1',
  ]);

  // --ca wins; one that cannot be read is refused before psql runs.
  const ca = join(tempDir(t), 'ca.crt');
  writeFileSync(ca, 'x');
  await s.ok(['service', 'psql', id, '--ca', ca]);
  assert.match(
    s.execs.at(-1)?.args[0] as string,
    new RegExp(`sslmode=verify-full sslrootcert=${ca} channel_binding=require$`),
  );
  const runs = s.execs.length;
  const missing = await s.basin(['service', 'psql', id, '--ca', '/nonexistent/ca.crt']);
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /Cannot read the CA certificate \/nonexistent\/ca\.crt/);
  assert.equal(s.execs.length, runs);
});
