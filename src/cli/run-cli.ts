// The `basin` command: finds the command a command line names, checks its
// usage, and runs it with what its kind needs: administration commands the
// store the server's configuration points at, `basin service` commands a
// client of the Basin `basin login` chose. The commands themselves live in
// one file per group; the work they do is in commands/ (administration) or
// the API (services). runCli takes its streams and environment as arguments
// so tests run it in process; basin.ts is the executable.

import { BasinError, createBasinClient } from '../client/index.js';
import { ConfigError, OPTIONS, parseStoreConfig, type StoreConfig } from '../config.js';
import { AppError } from '../domain/errors.js';
import { systemClock } from '../lib/clock.js';
import { openStore, storeWhere } from '../open-store.js';
import type { Store } from '../store/store.js';
import {
  type BaseContext,
  type CliCommand,
  CliFailure,
  type CliGroup,
  type CliIo,
  type CliOption,
  UsageError,
} from './command.js';
import { DATA_DIR, GLOBAL_OPTIONS, STORE_URL } from './global-options.js';
import { GROUPS } from './groups.js';
import { commandHelp, commandPath, groupHelp, mainHelp, shortUsage } from './help.js';
import { projectOf } from './login-group.js';
import { LoginError, readLogin } from './login-file.js';
import { parseArgv } from './parse-argv.js';

export type { CliIo } from './command.js';

/**
 * Every option any command takes, so that parseArgs knows which take values
 * wherever they appear; an option name means the same in every command.
 */
const ALL_OPTIONS = GROUPS.flatMap((g) => g.commands.map((c) => c.options)).reduce<
  Record<string, CliOption>
>(
  (all, options) => {
    for (const [name, o] of Object.entries(options)) {
      const other = all[name];
      if (other && (!other.value !== !o.value || !other.multiple !== !o.multiple))
        throw new Error(`The CLI option --${name} is not the same in every command.`);
      all[name] = o;
    }
    return all;
  },
  { ...GLOBAL_OPTIONS },
);

/** Runs `basin <argv>`; returns the exit code (0 done, 1 failed, 2 bad usage). */
export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  try {
    return await dispatch(argv, io);
  } catch (err) {
    return report(err, io);
  }
}

async function dispatch(argv: readonly string[], io: CliIo): Promise<number> {
  const { positionals, rest, options, problem } = parseArgv(argv, ALL_OPTIONS);
  let help = options.has('help');
  // `basin help [group [command]]` is `basin [group [command]] --help`.
  if (positionals[0] === 'help') {
    positionals.shift();
    help = true;
  }
  const [groupName] = positionals;
  const group = GROUPS.find((g) => g.name === groupName);
  // A standalone group is its own command: `basin login --url …`; a
  // command's name may be two words (`basin vpc peering create`).
  const commandName = group?.standalone ? group.name : positionals[1];
  const named = (name: string | undefined) => group?.commands.find((c) => c.name === name);
  const command = group?.standalone
    ? named(commandName)
    : (named(positionals.slice(1, 3).join(' ')) ?? named(commandName));
  const args = positionals.slice(
    group?.standalone ? 1 : 1 + (command?.name.split(' ').length ?? 1),
  );
  // A bad option is reported with the usage of the command it was given to.
  if (problem !== undefined)
    throw new UsageError(problem, { ...(group && { group }), ...(command && { command }) });
  const show = (text: string) => (io.stdout.write(text), 0);

  if (groupName === undefined) {
    if (help) return show(mainHelp(GROUPS));
    throw new UsageError('Missing command.');
  }
  if (!group)
    throw new UsageError(
      `Unknown command ${groupName}; the commands are ${GROUPS.map((g) => g.name).join(', ')}.`,
    );
  if (commandName === undefined) {
    if (help) return show(groupHelp(group));
    throw new UsageError(`Missing subcommand of ${group.name}.`, { group });
  }
  if (!command) {
    const words = group.commands
      .filter((c) => c.name.startsWith(`${commandName} `))
      .map((c) => c.name.split(' ')[1]);
    throw new UsageError(
      words.length > 0
        ? `${positionals[2] === undefined ? 'Missing' : 'Unknown'} subcommand of ${group.name} ${commandName}: ${words.join(', ')}.`
        : `Unknown subcommand ${group.name} ${commandName}.`,
      { group },
    );
  }
  if (help) return show(commandHelp(group, command));

  const value = (name: string) => options.get(name);
  const opt = (name: string): string | undefined => {
    const v = value(name);
    return Array.isArray(v) ? v[v.length - 1] : undefined;
  };
  checkUsage(group, command, args, rest, options, opt, io.env);

  let exitCode = 0;
  const base: BaseContext = {
    clock: io.clock ?? systemClock,
    args,
    rest,
    opt,
    opts: (name) => {
      const v = value(name);
      return Array.isArray(v) ? v : [];
    },
    flag: (name) => value(name) === true,
    json: options.has('json'),
    env: io.env,
    io,
    out: (text) => io.stdout.write(text),
    note: (text) => io.stderr.write(text),
    print: (v) => io.stdout.write(`${JSON.stringify(v, null, 2)}\n`),
    exit: (code) => void (exitCode = code),
  };
  switch (command.kind) {
    case 'plain':
      await command.run(base);
      break;
    case 'api': {
      const login = readLogin(io.env);
      if (!login)
        throw new LoginError(
          'Not logged in: run `basin login --url <url>` (or set BASIN_URL and BASIN_API_KEY).',
        );
      const api = createBasinClient({ url: login.url, apiKey: login.apiKey });
      const projectId = opt('project') ?? login.projectId ?? (await projectOf(api));
      await command.run({ ...base, api, login, projectId });
      break;
    }
    default: {
      const dataDir = opt(DATA_DIR);
      const storeUrl = opt(STORE_URL);
      const config = parseStoreConfig(
        [
          ...(dataDir === undefined ? [] : [OPTIONS.dataDir.flag, dataDir]),
          ...(storeUrl === undefined ? [] : [OPTIONS.storeUrl.flag, storeUrl]),
        ],
        io.env,
      );
      const store = await open(config, io);
      try {
        await command.run({ ...base, store });
      } finally {
        store.close();
      }
    }
  }
  return exitCode;
}

function checkUsage(
  group: CliGroup,
  command: CliCommand,
  args: readonly string[],
  rest: readonly string[],
  options: ReadonlyMap<string, unknown>,
  opt: (name: string) => string | undefined,
  env: NodeJS.ProcessEnv,
): void {
  const about = { group, command };
  if (rest.length > 0 && command.rest === undefined)
    throw new UsageError(`${commandPath(group, command)} takes nothing after --.`, about);
  for (const name of options.keys()) {
    if (!(name in GLOBAL_OPTIONS) && !(name in command.options))
      throw new UsageError(`${commandPath(group, command)} takes no --${name}.`, about);
  }
  if (args.length < command.args.length)
    throw new UsageError(`Missing <${command.args[args.length] as string}>.`, about);
  if (args.length > command.args.length)
    throw new UsageError(`Unexpected argument ${args[command.args.length] as string}.`, about);
  const problem = command.check?.(opt, { args, env, flag: (name) => options.get(name) === true });
  if (problem !== undefined) throw new UsageError(problem, about);
}

class StoreOpenError extends Error {}

async function open(config: StoreConfig, io: CliIo): Promise<Store> {
  try {
    const { store, createdDataDir } = await openStore(config);
    if (createdDataDir) io.stderr.write(`basin: created the data directory ${config.dataDir}\n`);
    return store;
  } catch (err) {
    throw new StoreOpenError(
      `Cannot open the store ${storeWhere(config)}: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
}

/** One line on stderr for what went wrong (the usage too, for bad usage); the exit code. */
function report(err: unknown, io: CliIo): number {
  if (err instanceof UsageError) {
    io.stderr.write(`basin: ${err.message}\n\n${shortUsage(GROUPS, err.about)}`);
    return 2;
  }
  if (err instanceof ConfigError) {
    io.stderr.write(`basin: ${err.message}\n`);
    return 2;
  }
  // An answer of Basin's: its message, and the code of its catalogue
  // (docs/errors.md) that a script can test.
  if (err instanceof BasinError && err.status !== undefined) {
    io.stderr.write(`basin: ${err.message} (${err.code})\n`);
    return 1;
  }
  if (
    err instanceof AppError ||
    err instanceof StoreOpenError ||
    err instanceof BasinError ||
    err instanceof CliFailure
  ) {
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

function isSqliteError(err: unknown): err is Error & { code: string } {
  const code = (err as { code?: unknown } | null)?.code;
  return err instanceof Error && typeof code === 'string' && code.startsWith('SQLITE_');
}
