// The shapes the `basin` command is built from: a group (project, user,
// credential) holds commands; each command declares its arguments, options,
// help and examples, and runs with what run-cli.ts hands it.

import type { Clock } from '../lib/clock.js';
import type { Store } from '../store/store.js';

/** Where the CLI reads and writes: process streams in basin.ts, strings in tests. */
export interface CliIo {
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown };
  env: NodeJS.ProcessEnv;
  clock?: Clock;
}

/** An option: `--name <value>` when `value` names its value, else a flag. */
export interface CliOption {
  value?: string;
  short?: string;
  help: string;
}

export interface CliCommand {
  name: string;
  /** Names of the positional arguments, in order, all required. */
  args: string[];
  options: Record<string, CliOption>;
  /** Synopses without `basin `, each with a one-line summary for listings. */
  usage: [synopsis: string, summary: string][];
  details: string;
  examples: string[];
  /** Usage checks beyond the generic ones, before the store is opened: what is wrong, if anything. */
  check?(opt: (name: string) => string | undefined): string | undefined;
  run(c: RunContext): Promise<void>;
}

export interface CliGroup {
  name: string;
  summary: string;
  commands: CliCommand[];
}

export interface RunContext {
  store: Store;
  clock: Clock;
  args: string[];
  opt(name: string): string | undefined;
  json: boolean;
  /** Text for stdout: the result. */
  out(text: string): void;
  /** Text for stderr: notes beside the result. */
  note(text: string): void;
  /** The result as indented JSON on stdout. */
  print(value: unknown): void;
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
