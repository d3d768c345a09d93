// The `basin` administration command, run in process against a temporary data
// directory, and then checked through the API of a Basin on the same store.

import assert from 'node:assert/strict';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { runCli } from '../../src/cli/run-cli.js';
import { sha256Hex } from '../../src/lib/secrets.js';
import { startBasin, tempDir, type TestBasin } from '../helpers.js';

interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

async function basin(
  dataDir: string | null,
  argv: string[],
  env: NodeJS.ProcessEnv = {},
): Promise<CliResult> {
  let stdout = '';
  let stderr = '';
  const code = await runCli(dataDir === null ? argv : ['--data-dir', dataDir, ...argv], {
    stdout: { write: (s: string) => (stdout += s) },
    stderr: { write: (s: string) => (stderr += s) },
    env,
  });
  return { code, stdout, stderr };
}

/** Runs a command that must succeed; returns its stdout. */
async function ok(dataDir: string, ...argv: string[]): Promise<string> {
  const r = await basin(dataDir, argv);
  assert.equal(r.code, 0, `basin ${argv.join(' ')} failed: ${r.stderr}`);
  return r.stdout;
}

async function okJson(dataDir: string, ...argv: string[]): Promise<any> {
  return JSON.parse(await ok(dataDir, '--json', ...argv));
}

interface Printed {
  id: string;
  bearerKey: string;
  accessKey: string;
  secretKey: string;
}

/** Reads the secrets from the human-readable output of `credential create`. */
function parseCredential(text: string): Printed {
  const field = (label: string) => {
    const m = new RegExp(`^\\s*${label}:\\s+(\\S+)$`, 'm').exec(text);
    assert.ok(m, `no ${label} in:\n${text}`);
    return m[1] as string;
  };
  return {
    id: field('Credential id'),
    bearerKey: field('Bearer key'),
    accessKey: field('Access key'),
    secretKey: field('Secret key'),
  };
}

async function createProjectCredential(dataDir: string, projectId: string): Promise<Printed> {
  const j = await okJson(dataDir, 'credential', 'create', '--project', projectId);
  return { id: j.id, bearerKey: j.bearer_key, accessKey: j.access_key, secretKey: j.secret_key };
}

const bearer = (key: string) => ({ authorization: `Bearer ${key}` });
const basic = (access: string, secret: string) => ({
  authorization: `Basic ${Buffer.from(`${access}:${secret}`).toString('base64')}`,
});

async function get(b: TestBasin, headers: Record<string, string>, url = '/v1/projects') {
  const res = await b.basin.app.inject({ method: 'GET', url, headers });
  return { status: res.statusCode, body: res.body ? JSON.parse(res.body) : undefined };
}

async function visibleProjectIds(b: TestBasin, headers: Record<string, string>) {
  const res = await get(b, headers);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return (res.body as { id: string }[]).map((p) => p.id).sort();
}

test('a project and credential made by the CLI authenticate against a Basin on the same data', async (t) => {
  const dataDir = tempDir(t);
  const projectId = (await ok(dataDir, 'project', 'create', 'web')).trim();
  assert.match(projectId, /^[a-z][a-z0-9]{9}$/);

  const out = await ok(dataDir, 'credential', 'create', '--project', projectId, '--name', 'ci');
  assert.match(out, /shown only now/);
  const cred = parseCredential(out);

  const b = await startBasin(t, { dataDir });
  assert.equal(
    b.basin.bootstrapped,
    undefined,
    'a data directory with a project is not bootstrapped',
  );
  assert.equal(b.projectId, projectId);

  for (const headers of [bearer(cred.bearerKey), basic(cred.accessKey, cred.secretKey)]) {
    const res = await get(b, headers);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual(
      res.body.map((p: { id: string; name: string }) => ({ id: p.id, name: p.name })),
      [{ id: projectId, name: 'web' }],
    );
  }
  // The secret key matters, not just the access key.
  const wrong = await get(b, basic(cred.accessKey, `${cred.secretKey}x`));
  assert.equal(wrong.status, 401);

  const listed = await okJson(dataDir, 'project', 'list');
  assert.deepEqual(
    listed.map((p: { id: string; name: string }) => [p.id, p.name]),
    [[projectId, 'web']],
  );
});

test('a user token sees every project of its user; a project credential only its own', async (t) => {
  const dataDir = tempDir(t);
  const a = (await okJson(dataDir, 'project', 'create', 'alpha')).id as string;
  const bId = (await okJson(dataDir, 'project', 'create', 'beta')).id as string;
  const c = (await okJson(dataDir, 'project', 'create', 'gamma')).id as string;
  const user = (await ok(dataDir, 'user', 'create', 'alice')).trim();
  await ok(dataDir, 'user', 'add', user, '--project', a);

  const token = await okJson(dataDir, 'credential', 'create', '--user', user, '--name', 'laptop');
  assert.equal(token.kind, 'user');
  assert.equal(token.user_id, user);
  const gammaCred = await createProjectCredential(dataDir, c);

  const b = await startBasin(t, { dataDir });
  assert.deepEqual(await visibleProjectIds(b, bearer(token.bearer_key)), [a]);

  // Added while the server runs: the existing token sees the project at once.
  await ok(dataDir, 'user', 'add', user, '--project', bId);
  const both = [a, bId].sort();
  assert.deepEqual(await visibleProjectIds(b, bearer(token.bearer_key)), both);
  assert.deepEqual(await visibleProjectIds(b, basic(token.access_key, token.secret_key)), both);
  assert.deepEqual(await visibleProjectIds(b, bearer(gammaCred.bearerKey)), [c]);

  const denied = await get(b, bearer(gammaCred.bearerKey), `/v1/projects/${a}/services`);
  assert.equal(denied.status, 404, JSON.stringify(denied.body));

  const users = await okJson(dataDir, 'user', 'list');
  assert.deepEqual(
    users.map((u: { id: string; name: string }) => [u.id, u.name]),
    [[user, 'alice']],
  );
  assert.deepEqual([...users[0].project_ids].sort(), both);
});

test('a revoked credential is refused at once by a running server', async (t) => {
  const dataDir = tempDir(t);
  const projectId = (await ok(dataDir, 'project', 'create', 'web')).trim();
  const cred = await createProjectCredential(dataDir, projectId);
  const other = await createProjectCredential(dataDir, projectId);
  const b = await startBasin(t, { dataDir });
  assert.deepEqual(await visibleProjectIds(b, bearer(cred.bearerKey)), [projectId]);

  const out = await ok(dataDir, 'credential', 'revoke', cred.id);
  assert.match(out, new RegExp(cred.id));

  for (const headers of [bearer(cred.bearerKey), basic(cred.accessKey, cred.secretKey)]) {
    const res = await get(b, headers);
    assert.equal(res.status, 401);
    assert.equal(res.body.code, 'UNAUTHORIZED');
    assert.equal(typeof res.body.message, 'string');
  }
  // Only that credential.
  assert.deepEqual(await visibleProjectIds(b, bearer(other.bearerKey)), [projectId]);

  const listed = await okJson(dataDir, 'credential', 'list');
  const row = listed.find((k: { id: string }) => k.id === cred.id);
  assert.equal(typeof row.revoked_at, 'string');
  assert.equal(listed.find((k: { id: string }) => k.id === other.id).revoked_at, null);

  const again = await basin(dataDir, ['credential', 'revoke', cred.id]);
  assert.equal(again.code, 1);
  assert.match(again.stderr, /^basin: No active credential/);
});

test('credential list shows credentials but never their secrets or hashes', async (t) => {
  const dataDir = tempDir(t);
  const projectId = (await ok(dataDir, 'project', 'create', 'web')).trim();
  const user = (await ok(dataDir, 'user', 'create', 'bob')).trim();
  await ok(dataDir, 'user', 'add', user, '--project', projectId);
  const projectCred = await createProjectCredential(dataDir, projectId);
  const userCred = parseCredential(await ok(dataDir, 'credential', 'create', '--user', user));

  const text = await ok(dataDir, 'credential', 'list');
  const json = await ok(dataDir, '--json', 'credential', 'list');
  for (const output of [text, json]) {
    for (const c of [projectCred, userCred]) {
      assert.ok(output.includes(c.id), 'lists the credential');
      for (const secret of [
        c.bearerKey,
        c.secretKey,
        sha256Hex(c.bearerKey),
        sha256Hex(c.secretKey),
      ])
        assert.ok(!output.includes(secret), 'no secret or hash in the listing');
    }
  }
  const rows = JSON.parse(json);
  assert.deepEqual(
    rows.map((r: any) => [r.id, r.kind, r.project_id, r.user_id]),
    [
      [projectCred.id, 'project', projectId, null],
      [userCred.id, 'user', null, user],
    ],
  );
  for (const r of rows)
    assert.deepEqual(Object.keys(r).sort(), [
      'access_key',
      'created_at',
      'id',
      'kind',
      'name',
      'project_id',
      'revoked_at',
      'user_id',
    ]);
  const header = text.split('\n')[0] as string;
  assert.match(header, /ID\s+KIND\s+OWNER\s+NAME/);
});

test('the store holds only hashes of the printed secrets', async (t) => {
  const dataDir = tempDir(t);
  const storeBytes = () => {
    const db = join(dataDir, 'basin.db');
    const wal = `${db}-wal`;
    return Buffer.concat([readFileSync(db), existsSync(wal) ? readFileSync(wal) : Buffer.alloc(0)]);
  };
  const assertNoPlaintext = (cred: Printed) => {
    const bytes = storeBytes();
    // The bytes read are the right ones: the public access key and the hashes are there.
    assert.ok(bytes.includes(cred.accessKey), 'the access key is stored');
    assert.ok(bytes.includes(sha256Hex(cred.bearerKey)), 'the bearer hash is stored');
    assert.ok(!bytes.includes(cred.bearerKey), 'no plaintext bearer key');
    assert.ok(!bytes.includes(cred.secretKey), 'no plaintext secret key');
  };

  // The CLI alone (its store is closed afterwards).
  const projectId = (await ok(dataDir, 'project', 'create', 'web')).trim();
  const first = parseCredential(await ok(dataDir, 'credential', 'create', '--project', projectId));
  assertNoPlaintext(first);

  // With a server holding the database open, so writes stay in the WAL.
  await startBasin(t, { dataDir });
  const second = await createProjectCredential(dataDir, projectId);
  assertNoPlaintext(first);
  assertNoPlaintext(second);
});

test('bad usage exits 2 with usage text and touches nothing', async (t) => {
  const dataDir = join(tempDir(t), 'not-yet');
  const cases: [string[], RegExp][] = [
    [['frob'], /Unknown command frob/],
    [['project', 'frob'], /Unknown subcommand project frob[\s\S]*Usage: basin project/],
    [['project'], /Missing subcommand of project/],
    [[], /Missing command/],
    [['credential', 'create'], /--project <project_id> or --user <user_id>/],
    [['credential', 'create', '--project', 'p', '--user', 'u'], /either --project or --user/],
    [['credential', 'create', '--project'], /--project needs a value/],
    [['user', 'add', 'someone'], /Give the project: --project <project_id>/],
    [['project', 'create'], /Missing <name>[\s\S]*Usage: basin project create <name>/],
    [['project', 'create', 'a', 'b'], /Unexpected argument b/],
    [['project', 'list', '--project', 'x'], /takes no --project/],
    [['project', 'list', '--frob'], /Unknown option --frob/],
    // Each group: unknown subcommands and options, missing values, with that group's usage.
    [['user', 'frob'], /Unknown subcommand user frob[\s\S]*basin user add <user_id>/],
    [['credential'], /Missing subcommand of credential[\s\S]*basin credential revoke/],
    [['user', '--frob'], /Unknown option --frob[\s\S]*basin user create <name>/],
    [
      ['project', 'create', 'x', '--user', 'u'],
      /takes no --user[\s\S]*Usage: basin project create/,
    ],
    [['user', 'list', '--name', 'x'], /basin user list takes no --name/],
    [['user', 'create'], /Missing <name>[\s\S]*Usage: basin user create <name>/],
    [['user', 'add'], /Missing <user_id>/],
    [['user', 'add', 'u', '--project'], /--project needs a value[\s\S]*Usage: basin user add/],
    [['credential', 'revoke'], /Missing <credential_id>[\s\S]*Usage: basin credential revoke/],
    [['credential', 'revoke', 'k', '--project', 'p'], /takes no --project/],
    [['credential', 'create', '--project', 'p', '--name'], /--name needs a value/],
    [['credential', 'create', '--project=', 'p'], /--project needs a value/],
    // A value that looks like an option is not taken as one (write --name=-x for that).
    [['credential', 'create', '--project', '--user', 'u'], /--project needs a value/],
    [
      ['credential', 'create', '--project', 'p', '--project', 'q'],
      /--project is given more than once/,
    ],
    [['--json=yes', 'project', 'list'], /--json takes no value/],
    [['project', 'list', '-x'], /Unknown option -x/],
    [['help', 'frob'], /Unknown command frob/],
    [['credential', 'frob', '--help'], /Unknown subcommand credential frob/],
  ];
  for (const [argv, message] of cases) {
    const r = await basin(dataDir, argv);
    assert.equal(r.code, 2, `basin ${argv.join(' ')}`);
    assert.match(r.stderr, /^basin: /);
    assert.match(r.stderr, message);
    assert.match(r.stderr, /Usage: basin/);
    assert.match(r.stderr, /Run `basin .*--help`/);
    assert.equal(r.stdout, '');
  }
  const noDir = await basin(null, ['project', 'list', '--data-dir']);
  assert.equal(noDir.code, 2);
  assert.match(noDir.stderr, /^basin: --data-dir needs a value: --data-dir <dir>\./);
  assert.equal(existsSync(dataDir), false, 'usage errors do not create the data directory');
});

/** Every command there is, with what its help must show. */
const GROUPS: Record<string, { synopses: string[]; options: string[]; standalone?: boolean }> = {
  project: { synopses: ['project create <name>', 'project list'], options: [] },
  user: {
    synopses: [
      'user create <name> [--email <address>]',
      'user set-email <user_id> <address>',
      'user add <user_id> --project <project_id>',
      'user list',
    ],
    options: ['--project <project_id>', '--email <address>'],
  },
  login: {
    standalone: true,
    synopses: ['login --url <url> [--key <key>] [--project <project_id>] [--ca <file>]'],
    options: ['--url <url>', '--key <key>', '--project <project_id>', '--ca <file>'],
  },
  service: {
    synopses: [
      'service list',
      'service get <service_id>',
      'service create <name> [--cpu <millicores> --memory <gigabytes>] [--addons <list>] [--wait]',
      'service delete <service_id> [--wait]',
      'service start <service_id> [--wait]',
      'service stop <service_id> [--wait]',
      'service resize <service_id> --cpu <millicores> --memory <gigabytes> [--wait]',
      'service fork <service_id> [--strategy <strategy>] [--target-time <time>] [--name <name>] [--wait]',
      'service rename <service_id> <name>',
      'service logs <service_id> [--severity <level>]… [--search <text>]… [--limit <n>]',
      'service psql <service_id> [--ca <file>] [-- <psql arguments>]',
    ],
    options: ['--output <format>', '--project <project_id>', '--wait', '--cpu <millicores>'],
  },
  credential: {
    synopses: [
      'credential create --project <project_id> [--name <name>]',
      'credential create --user <user_id> [--name <name>]',
      'credential list',
      'credential revoke <credential_id>',
    ],
    options: ['--project <project_id>', '--user <user_id>', '--name <name>'],
  },
};
const GLOBAL = ['--data-dir <dir>', 'BASIN_DATA_DIR', '--json', '-h, --help'];

/** The example lines of a help text (indented lines after "Examples:"). */
function examples(help: string): string[] {
  const after = help.split('\nExamples:\n')[1] ?? '';
  return after.split('\n\n')[0]?.split('\n').filter(Boolean) ?? [];
}

test('basin --help lists every command, the global options and examples', async () => {
  for (const argv of [['--help'], ['-h'], ['help']]) {
    const r = await basin(null, argv);
    assert.equal(r.code, 0);
    assert.equal(r.stderr, '');
    assert.match(r.stdout, /^Usage: basin /);
    for (const synopsis of Object.values(GROUPS).flatMap((g) => g.synopses))
      assert.ok(r.stdout.includes(`basin ${synopsis}`), synopsis);
    for (const option of GLOBAL) assert.ok(r.stdout.includes(option), option);
    const ex = examples(r.stdout);
    for (const group of Object.keys(GROUPS))
      assert.ok(
        ex.some((line) => line.includes(`basin ${group} `)),
        `an example of ${group}`,
      );
  }
});

test('basin <group> --help lists each command of the group, its options and examples', async () => {
  for (const [group, { synopses, options, standalone }] of Object.entries(GROUPS)) {
    for (const argv of [
      [group, '--help'],
      ['help', group],
    ]) {
      const r = await basin(null, argv);
      assert.equal(r.code, 0, `basin ${argv.join(' ')}`);
      assert.match(r.stdout, new RegExp(`^Usage: basin ${group} ${standalone ? '--' : '<'}`));
      for (const synopsis of synopses) assert.ok(r.stdout.includes(`basin ${synopsis}`), synopsis);
      for (const option of [...options, ...GLOBAL]) assert.ok(r.stdout.includes(option), option);
      const ex = examples(r.stdout);
      for (const synopsis of synopses) {
        const command = standalone ? group : synopsis.split(' ').slice(0, 2).join(' ');
        assert.ok(
          ex.some(
            (line) => line.includes(`basin ${command}`) || line.includes(`basin --json ${command}`),
          ),
          `an example of ${command} in basin ${group} --help`,
        );
      }
    }
    // And each command's own help: its synopses, options and examples.
    for (const synopsis of synopses) {
      const [, command] = synopsis.split(' ');
      const r = await basin(
        null,
        standalone ? [group, '--help'] : [group, command as string, '--help'],
      );
      assert.equal(r.code, 0);
      assert.ok(r.stdout.includes(`basin ${synopsis}`), synopsis);
      assert.ok(examples(r.stdout).length > 0, `examples for ${group} ${command}`);
    }
  }
});

test('errors from the store are one clear line, exit 1, no stack trace', async (t) => {
  const dataDir = tempDir(t);
  const projectId = (await ok(dataDir, 'project', 'create', 'web')).trim();
  await ok(dataDir, 'user', 'create', 'carol');
  const cases: [string[], RegExp][] = [
    [['credential', 'create', '--project', 'nope'], /^basin: Project nope not found\.\n$/],
    [['credential', 'create', '--user', 'nobody'], /^basin: User nobody not found\.\n$/],
    [['user', 'add', 'nobody', '--project', projectId], /^basin: User nobody not found\.\n$/],
    [['user', 'create', 'carol'], /^basin: A user named carol exists already\.\n$/],
    [['credential', 'revoke', 'nope'], /^basin: No active credential nope\.\n$/],
    [['project', 'create', ' '], /^basin: name must not be empty\.\n$/],
  ];
  for (const [argv, message] of cases) {
    const r = await basin(dataDir, argv);
    assert.equal(r.code, 1, `basin ${argv.join(' ')}`);
    assert.match(r.stderr, message);
    assert.equal(r.stdout, '');
  }
  // Nothing was half-made.
  assert.deepEqual(await okJson(dataDir, 'credential', 'list'), []);
});

test('help, the data directory default and its creation', async (t) => {
  const help = await basin(null, ['--help']);
  assert.equal(help.code, 0);
  assert.match(help.stdout, /^Usage: basin /);
  for (const cmd of ['project create', 'credential create', 'credential revoke', 'user add'])
    assert.ok(help.stdout.includes(cmd), cmd);
  for (const argv of [
    ['credential', 'create', '--help'],
    ['help', 'credential', 'create'],
  ]) {
    const r = await basin(null, argv);
    assert.equal(r.code, 0);
    assert.match(r.stdout, /Usage: basin credential create --project <project_id>/);
  }
  const group = await basin(null, ['user', '-h']);
  assert.equal(group.code, 0);
  assert.match(group.stdout, /basin user add <user_id> --project <project_id>/);

  // BASIN_DATA_DIR, like the server; a missing directory is created, private.
  const dataDir = join(tempDir(t), 'a', 'b');
  const r = await basin(null, ['project', 'create', 'web'], { BASIN_DATA_DIR: dataDir });
  assert.equal(r.code, 0, r.stderr);
  assert.equal(statSync(dataDir).mode & 0o777, 0o700);
  assert.ok(existsSync(join(dataDir, 'basin.db')));
  const b = await startBasin(t, { dataDir });
  assert.equal(b.projectId, r.stdout.trim());
});
