// The `basin` administration command: projects, users and credentials, on the
// same SQLite store the server uses (WAL and busy_timeout let both write).
// runCli takes its streams and environment as arguments so tests run it in
// process; src/cli/basin.ts is the executable that wires in the real ones.

import { existsSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import {
  addUserToProject,
  createProject,
  createUser,
  issueCredential,
  revokeCredential,
} from '../commands/admin.js';
import { OPTIONS } from '../config.js';
import { AppError } from '../domain/errors.js';
import { type Clock, systemClock } from '../lib/clock.js';
import { openSqliteStore } from '../store/sqlite/sqlite-store.js';
import type { Credential, Store } from '../store/store.js';

export interface CliIo {
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown };
  env: NodeJS.ProcessEnv;
  clock?: Clock;
}

/** Bad command-line usage: exit 2 with the usage text of `command`. */
class UsageError extends Error {
  constructor(
    message: string,
    readonly command?: Command | string,
  ) {
    super(message);
  }
}

// ---------------------------------------------------------------------------
// Options. Every option is parsed wherever it appears; each command then says
// which of the command options it accepts.

interface OptionSpec {
  value: boolean;
}

const OPTION_SPECS: Record<string, OptionSpec> = {
  'data-dir': { value: true },
  json: { value: false },
  help: { value: false },
  project: { value: true },
  user: { value: true },
  name: { value: true },
};
const GLOBAL_OPTIONS = new Set(['data-dir', 'json', 'help']);

interface ParsedArgs {
  positionals: string[];
  options: Map<string, string | true>;
}

function parseArgs(argv: readonly string[]): ParsedArgs {
  const positionals: string[] = [];
  const options = new Map<string, string | true>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (arg === '--') {
      positionals.push(...argv.slice(i + 1));
      break;
    }
    if (arg === '-h') {
      options.set('help', true);
      continue;
    }
    if (!arg.startsWith('--') || arg === '-') {
      if (arg.startsWith('-') && arg !== '-') throw new UsageError(`Unknown option ${arg}.`);
      positionals.push(arg);
      continue;
    }
    const eq = arg.indexOf('=');
    const name = eq < 0 ? arg.slice(2) : arg.slice(2, eq);
    const spec = OPTION_SPECS[name];
    if (!spec) throw new UsageError(`Unknown option --${name}.`);
    if (options.has(name)) throw new UsageError(`--${name} is given more than once.`);
    if (!spec.value) {
      if (eq >= 0) throw new UsageError(`--${name} takes no value.`);
      options.set(name, true);
      continue;
    }
    const value = eq >= 0 ? arg.slice(eq + 1) : argv[++i];
    if (value === undefined || value === '') throw new UsageError(`--${name} needs a value.`);
    options.set(name, value);
  }
  return { positionals, options };
}

// ---------------------------------------------------------------------------
// Commands.

interface RunContext {
  store: Store;
  clock: Clock;
  args: string[];
  opt(name: string): string | undefined;
  json: boolean;
  out(text: string): void;
  err(text: string): void;
  print(value: unknown): void;
}

interface Command {
  group: string;
  action: string;
  /** Names of the positional arguments, in order. */
  args: string[];
  /** Command options it accepts (beyond the global ones). */
  options: string[];
  /** Synopsis lines, each with a one-line summary for the listings. */
  usage: [synopsis: string, summary: string][];
  details: string;
  /** Usage checks beyond the generic ones; run before the store is opened. */
  check?(opt: (name: string) => string | undefined): void;
  run(ctx: RunContext): Promise<void>;
}

const DEFAULT_CREDENTIAL_NAME = 'cli';

const COMMANDS: Command[] = [
  {
    group: 'project',
    action: 'create',
    args: ['name'],
    options: [],
    usage: [['project create <name>', 'create a project; prints its id']],
    details: [
      'Creates a project and prints its id (with --json, the project as JSON).',
      '',
      'The server creates a "default" project and a first credential only when it',
      'starts on a data directory with no project at all; once a project exists,',
      'that bootstrap no longer happens, so issue credentials with',
      '`basin credential create`.',
    ].join('\n'),
    async run(c) {
      const project = await createProject(c.store, c.clock, c.args[0] as string);
      if (c.json) c.print({ id: project.id, name: project.name, created_at: project.createdAt });
      else c.out(`${project.id}\n`);
    },
  },
  {
    group: 'project',
    action: 'list',
    args: [],
    options: [],
    usage: [['project list', 'list projects']],
    details: 'Lists every project: id, name and creation time.',
    async run(c) {
      const projects = await c.store.projects.list();
      if (c.json) {
        c.print(projects.map((p) => ({ id: p.id, name: p.name, created_at: p.createdAt })));
      } else {
        c.out(
          table(
            ['ID', 'NAME', 'CREATED'],
            projects.map((p) => [p.id, p.name, p.createdAt]),
          ),
        );
      }
    },
  },
  {
    group: 'user',
    action: 'create',
    args: ['name'],
    options: [],
    usage: [['user create <name>', 'create a user; prints its id']],
    details: [
      'Creates a user (names are unique) and prints its id.',
      'A user sees nothing until added to projects with `basin user add`; it',
      'authenticates with a user token from `basin credential create --user`.',
    ].join('\n'),
    async run(c) {
      const user = await createUser(c.store, c.clock, c.args[0] as string);
      if (c.json) c.print({ id: user.id, name: user.name, created_at: user.createdAt });
      else c.out(`${user.id}\n`);
    },
  },
  {
    group: 'user',
    action: 'add',
    args: ['user_id'],
    options: ['project'],
    usage: [['user add <user_id> --project <project_id>', 'add a user to a project']],
    details: [
      "Adds the user to the project. The user's tokens see the project at once,",
      'also on a running server. Adding a user twice is harmless.',
    ].join('\n'),
    check(opt) {
      if (opt('project') === undefined)
        throw new UsageError('Give the project: --project <project_id>.');
    },
    async run(c) {
      const userId = c.args[0] as string;
      const projectId = c.opt('project') as string;
      await addUserToProject(c.store, userId, projectId);
      if (c.json) c.print({ user_id: userId, project_id: projectId });
      else c.out(`Added user ${userId} to project ${projectId}.\n`);
    },
  },
  {
    group: 'user',
    action: 'list',
    args: [],
    options: [],
    usage: [['user list', 'list users and their projects']],
    details: 'Lists every user: id, name, creation time and the projects it belongs to.',
    async run(c) {
      const users = await c.store.users.list();
      const rows = await Promise.all(
        users.map(async (u) => ({
          id: u.id,
          name: u.name,
          created_at: u.createdAt,
          project_ids: await c.store.users.projectIds(u.id),
        })),
      );
      if (c.json) {
        c.print(rows);
      } else {
        c.out(
          table(
            ['ID', 'NAME', 'CREATED', 'PROJECTS'],
            rows.map((u) => [u.id, u.name, u.created_at, u.project_ids.join(',') || '-']),
          ),
        );
      }
    },
  },
  {
    group: 'credential',
    action: 'create',
    args: [],
    options: ['project', 'user', 'name'],
    usage: [
      [
        'credential create --project <project_id> [--name <name>]',
        'issue a project credential: sees the project (shown once)',
      ],
      [
        'credential create --user <user_id> [--name <name>]',
        "issue a user token: sees all the user's projects (shown once)",
      ],
    ],
    details: [
      'Issues an API credential and prints, once, its id, a bearer key and an',
      'access key / secret key pair. Basin stores only hashes of the secrets:',
      'they cannot be shown again; a lost secret means a new credential.',
      '',
      '  --project <project_id>  a project credential: sees that project only',
      '  --user <user_id>        a user token: sees every project the user belongs to',
      `  --name <name>           a label for listings (default "${DEFAULT_CREDENTIAL_NAME}")`,
      '',
      'Use either as `Authorization: Bearer <bearer key>` or as HTTP Basic',
      'authentication with <access key>:<secret key>.',
    ].join('\n'),
    check(opt) {
      if (opt('project') !== undefined && opt('user') !== undefined)
        throw new UsageError('Give either --project or --user, not both.');
      if (opt('project') === undefined && opt('user') === undefined)
        throw new UsageError(
          'Say whom the credential is for: --project <project_id> or --user <user_id>.',
        );
    },
    async run(c) {
      const projectId = c.opt('project');
      const userId = c.opt('user');
      const name = c.opt('name') ?? DEFAULT_CREDENTIAL_NAME;
      const owner = projectId !== undefined ? { projectId } : { userId: userId as string };
      const issued = await issueCredential(c.store, c.clock, owner, name);
      const kind = projectId !== undefined ? 'project' : 'user';
      if (c.json) {
        c.print({
          id: issued.id,
          kind,
          project_id: projectId ?? null,
          user_id: userId ?? null,
          name,
          bearer_key: issued.bearerKey,
          access_key: issued.accessKey,
          secret_key: issued.secretKey,
        });
      } else {
        c.out(
          [
            `Created ${kind} credential ${issued.id} (${name}) for ${kind} ${projectId ?? userId}.`,
            `  Credential id:  ${issued.id}`,
            `  Bearer key:     ${issued.bearerKey}`,
            `  Access key:     ${issued.accessKey}`,
            `  Secret key:     ${issued.secretKey}`,
            'These secrets are shown only now: Basin keeps only their hashes. Store them safely.',
            '',
          ].join('\n'),
        );
      }
      if (userId !== undefined && (await c.store.users.projectIds(userId)).length === 0) {
        c.err(
          `basin: note: user ${userId} belongs to no project yet; add it with \`basin user add ${userId} --project <project_id>\`.\n`,
        );
      }
    },
  },
  {
    group: 'credential',
    action: 'list',
    args: [],
    options: [],
    usage: [['credential list', 'list credentials (never their secrets)']],
    details: [
      'Lists every credential: id, kind, owner (project or user id), name, access',
      'key (the public half of the Basic pair), creation and revocation times.',
      'Secrets are never shown: Basin does not have them.',
    ].join('\n'),
    async run(c) {
      const creds = (await c.store.credentials.list()).map(publicView);
      if (c.json) {
        c.print(creds);
      } else {
        c.out(
          table(
            ['ID', 'KIND', 'OWNER', 'NAME', 'ACCESS KEY', 'CREATED', 'REVOKED'],
            creds.map((k) => [
              k.id,
              k.kind,
              (k.project_id ?? k.user_id) as string,
              k.name,
              k.access_key,
              k.created_at,
              k.revoked_at ?? '-',
            ]),
          ),
        );
      }
    },
  },
  {
    group: 'credential',
    action: 'revoke',
    args: ['credential_id'],
    options: [],
    usage: [['credential revoke <credential_id>', 'revoke a credential at once']],
    details: [
      'Revokes the credential: both its bearer key and its access/secret pair stop',
      'working at once, also on a running server. Revocation cannot be undone.',
    ].join('\n'),
    async run(c) {
      const id = c.args[0] as string;
      await revokeCredential(c.store, c.clock, id);
      if (c.json) c.print({ id, revoked: true });
      else c.out(`Revoked credential ${id}.\n`);
    },
  },
];

/** A credential as listed: no hashes, and no secrets (Basin has none). */
function publicView(k: Credential) {
  return {
    id: k.id,
    kind: k.kind,
    project_id: k.projectId,
    user_id: k.userId,
    name: k.name,
    access_key: k.accessKey,
    created_at: k.createdAt,
    revoked_at: k.revokedAt,
  };
}

const GROUPS = [...new Set(COMMANDS.map((c) => c.group))];

// ---------------------------------------------------------------------------
// Help texts.

const GLOBAL_HELP = [
  'Global options:',
  `  --data-dir <dir>  the server's data directory (env ${OPTIONS.dataDir.env}, default ${OPTIONS.dataDir.default});`,
  '                    created if missing',
  '  --json            print JSON, for scripts',
  '  -h, --help        show help',
].join('\n');

function mainHelp(): string {
  return [
    'Usage: basin [--data-dir <dir>] [--json] <command> [options]',
    '',
    'Administers a Basin data directory: projects, users and API credentials.',
    'Works on the same store as the server, also while the server runs.',
    '',
    'Commands:',
    ...listing(COMMANDS, ''),
    '',
    GLOBAL_HELP,
    '',
    'The server bootstraps a "default" project and credential only into a data',
    'directory without projects; after `basin project create` it does not.',
    'Run `basin <command> --help` for more about a command.',
    '',
  ].join('\n');
}

function groupHelp(group: string): string {
  const cmds = COMMANDS.filter((c) => c.group === group);
  return [
    `Usage: basin ${group} <${cmds.map((c) => c.action).join('|')}> [options]`,
    '',
    ...listing(cmds, 'basin '),
    '',
    `Run \`basin ${group} <subcommand> --help\` for more.`,
    '',
  ].join('\n');
}

/** Synopses and summaries in two columns; a long synopsis gets a line of its own. */
function listing(cmds: readonly Command[], prefix: string): string[] {
  const entries = cmds.flatMap((c) => c.usage.map(([syn, sum]) => [prefix + syn, sum] as const));
  const width = Math.max(...entries.map(([syn]) => syn.length).filter((n) => n <= 42));
  return entries.map(([syn, sum]) =>
    syn.length > width
      ? `  ${syn}\n  ${' '.repeat(width)}  ${sum}`
      : `  ${syn.padEnd(width)}  ${sum}`,
  );
}

function commandHelp(c: Command): string {
  const usage = c.usage.map(([syn], i) => `${i === 0 ? 'Usage:' : '      '} basin ${syn}`);
  return [...usage, '', c.details, '', GLOBAL_HELP, ''].join('\n');
}

// ---------------------------------------------------------------------------
// Entry point.

/** Runs `basin <argv>`; returns the exit code (0 ok, 1 failed, 2 bad usage). */
export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  let command: Command | undefined;
  try {
    const { positionals, options } = parseArgs(argv);
    let group = positionals[0];
    if (group === 'help') {
      // `basin help [group [action]]` is `basin [group [action]] --help`.
      positionals.shift();
      options.set('help', true);
      group = positionals[0];
    }
    if (group === undefined) {
      if (options.has('help')) {
        io.stdout.write(mainHelp());
        return 0;
      }
      throw new UsageError('Missing command.');
    }
    if (!GROUPS.includes(group))
      throw new UsageError(`Unknown command ${group}; the commands are ${GROUPS.join(', ')}.`);
    const action = positionals[1];
    if (action === undefined) {
      if (options.has('help')) {
        io.stdout.write(groupHelp(group));
        return 0;
      }
      throw new UsageError(`Missing subcommand of ${group}.`, group);
    }
    command = COMMANDS.find((c) => c.group === group && c.action === action);
    if (!command) throw new UsageError(`Unknown subcommand ${group} ${action}.`, group);
    if (options.has('help')) {
      io.stdout.write(commandHelp(command));
      return 0;
    }
    const cmd = command;
    for (const name of options.keys()) {
      if (!GLOBAL_OPTIONS.has(name) && !cmd.options.includes(name))
        throw new UsageError(`basin ${cmd.group} ${cmd.action} takes no --${name}.`, cmd);
    }
    const args = positionals.slice(2);
    if (args.length < cmd.args.length)
      throw new UsageError(`Missing <${cmd.args[args.length] as string}>.`, cmd);
    if (args.length > cmd.args.length)
      throw new UsageError(`Unexpected argument ${args[cmd.args.length] as string}.`, cmd);
    const opt = (name: string): string | undefined => {
      const v = options.get(name);
      return typeof v === 'string' ? v : undefined;
    };
    cmd.check?.(opt);

    const dataDirOption = options.get('data-dir');
    const envDataDir = io.env[OPTIONS.dataDir.env];
    const dataDir = resolve(
      typeof dataDirOption === 'string'
        ? dataDirOption
        : envDataDir !== undefined && envDataDir !== ''
          ? envDataDir
          : OPTIONS.dataDir.default,
    );
    const store = openStore(dataDir, io);
    const json = options.has('json');
    try {
      await cmd.run({
        store,
        clock: io.clock ?? systemClock,
        args,
        opt,
        json,
        out: (text) => io.stdout.write(text),
        err: (text) => io.stderr.write(text),
        print: (value) => io.stdout.write(`${JSON.stringify(value, null, 2)}\n`),
      });
    } finally {
      store.close();
    }
    return 0;
  } catch (err) {
    if (err instanceof UsageError) {
      const c = err.command ?? command;
      const usage =
        c === undefined ? mainHelp() : typeof c === 'string' ? groupHelp(c) : commandHelp(c);
      io.stderr.write(`basin: ${err.message}\n\n${usage}`);
      return 2;
    }
    if (err instanceof AppError || err instanceof StoreOpenError) {
      io.stderr.write(`basin: ${err.message}\n`);
      return 1;
    }
    if (isSqliteError(err)) {
      // E.g. SQLITE_BUSY when another process held the write lock past busy_timeout.
      io.stderr.write(`basin: the store failed (${err.code}): ${err.message}\n`);
      return 1;
    }
    // Not expected: a bug. Keep the stack for the report.
    io.stderr.write(`basin: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    return 1;
  }
}

class StoreOpenError extends Error {}

function isSqliteError(err: unknown): err is Error & { code: string } {
  const code = (err as { code?: unknown } | null)?.code;
  return err instanceof Error && typeof code === 'string' && code.startsWith('SQLITE_');
}

/** Opens `<dataDir>/basin.db`, creating the directory (0700) if needed. */
function openStore(dataDir: string, io: CliIo): Store {
  const file = join(dataDir, 'basin.db');
  try {
    if (!existsSync(dataDir)) {
      mkdirSync(dataDir, { recursive: true, mode: 0o700 });
      io.stderr.write(`basin: created the data directory ${dataDir}\n`);
    }
    return openSqliteStore(file);
  } catch (err) {
    throw new StoreOpenError(
      `Cannot open the store ${file}: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
}

/** Left-aligned columns separated by two spaces; the last column is not padded. */
function table(header: string[], rows: string[][]): string {
  const all = [header, ...rows];
  const widths = header.map((_, i) => Math.max(...all.map((r) => (r[i] ?? '').length)));
  return all
    .map((r) =>
      r.map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i] ?? 0))).join('  '),
    )
    .join('\n')
    .concat('\n');
}
