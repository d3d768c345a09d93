// The shapes the `basin` command is built from: a group (project, user,
// credential, service…) holds commands; each command declares its
// arguments, options, help and examples, and runs with what run-cli.ts hands
// it. Commands of three kinds: administration works on the data directory's
// store; `api` commands drive a Basin over HTTP with the typed client, as the
// login (login-file.ts) says; `plain` ones need neither (basin login).

import type { BasinClient } from '../client/index.js';
import type { Clock } from '../lib/clock.js';
import type { Store } from '../store/store.js';
import { CliFailure } from './cli-failure.js';
import type { Login } from './login-file.js';

/** Where the CLI reads and writes: process streams in basin.ts, strings in tests. */
export interface CliIo {
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown };
  env: NodeJS.ProcessEnv;
  clock?: Clock;
  /**
   * A terminal for a live status line (`--wait`). basin.ts gives stderr when
   * both stdout and stderr are terminals; otherwise (pipes, files, tests)
   * there is none and waits are quiet.
   */
  statusTerminal?: NodeJS.WriteStream;
  /** Standard input to its end, when it is not a terminal (a key piped to `basin login`). */
  readStdin?: () => Promise<string>;
  /** Runs a program on the terminal (basin service psql) and resolves with its exit code. */
  exec?: (file: string, args: readonly string[], env: NodeJS.ProcessEnv) => Promise<number>;
}

/** An option: `--name <value>` when `value` names its value, else a flag. */
export interface CliOption {
  value?: string;
  short?: string;
  /** May be given more than once (values are collected in order). */
  multiple?: boolean;
  help: string;
}

interface CommandBase {
  name: string;
  /** Names of the positional arguments, in order, all required. */
  args: string[];
  /** What the arguments after `--` are for (passed through), if the command takes any. */
  rest?: string;
  options: Record<string, CliOption>;
  /** Synopses without `basin `, each with a one-line summary for listings. */
  usage: [synopsis: string, summary: string][];
  details: string;
  examples: string[];
  /**
   * Usage checks beyond the generic ones, before anything is opened: what is
   * wrong, if anything. `line`: the positional arguments, the flags given
   * and the environment.
   */
  check?(
    opt: (name: string) => string | undefined,
    line: { args: readonly string[]; flag(name: string): boolean; env: NodeJS.ProcessEnv },
  ): string | undefined;
}

/** An administration command: works on the data directory's store. */
export interface StoreCommand extends CommandBase {
  kind?: 'store';
  run(c: RunContext): Promise<void>;
}

/** A command that drives a Basin over HTTP, as logged in. */
export interface ApiCommand extends CommandBase {
  kind: 'api';
  run(c: ApiContext): Promise<void>;
}

/** A command that needs neither the store nor a login. */
export interface PlainCommand extends CommandBase {
  kind: 'plain';
  run(c: BaseContext): Promise<void>;
}

export type CliCommand = StoreCommand | ApiCommand | PlainCommand;

export interface CliGroup {
  name: string;
  summary: string;
  /** The group is itself the command (`basin login`): it has exactly one, of its own name. */
  standalone?: boolean;
  commands: CliCommand[];
}

export interface BaseContext {
  clock: Clock;
  args: string[];
  /** The arguments after `--`, for a command that takes them. */
  rest: string[];
  /** An option's value (the last, for one given several times). */
  opt(name: string): string | undefined;
  /** Every value of an option given several times, in order. */
  opts(name: string): string[];
  /** Whether a flag was given. */
  flag(name: string): boolean;
  json: boolean;
  env: NodeJS.ProcessEnv;
  io: CliIo;
  /** Text for stdout: the result. */
  out(text: string): void;
  /** Text for stderr: notes beside the result. */
  note(text: string): void;
  /** The result as indented JSON on stdout. */
  print(value: unknown): void;
  /** The exit status to end with (a program the command ran: psql's). */
  exit(code: number): void;
}

export interface RunContext extends BaseContext {
  store: Store;
}

export interface ApiContext extends BaseContext {
  api: BasinClient;
  login: Login;
  /** The project the commands work in: --project, else the login's. */
  projectId: string;
}

/** Bad command-line usage: exit 2, with the usage of what was being run. */
export class UsageError extends Error {
  constructor(
    message: string,
    readonly about: { group?: CliGroup; command?: CliCommand } = {},
  ) {
    super(message);
  }
}

export { CliFailure };
