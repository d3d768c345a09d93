// Splits the command line with node:util's parseArgs, then checks what it
// found against the options Basin knows, so that every mistake gets a message
// that names the option (parseArgs' own strict errors are worded for
// programmers and vary between Node versions).

import { parseArgs } from 'node:util';
import type { CliOption } from './command.js';

export interface ParsedArgv {
  positionals: string[];
  /** What follows `--`, untouched (passed on to another program). */
  rest: string[];
  /** Options by long name: the values (in order), or true for a flag. */
  options: Map<string, string[] | true>;
  /** The first thing wrong with the options, for a usage error. */
  problem?: string;
}

/**
 * Parses `argv` with the options in `known` accepted anywhere on the line.
 * Unknown options, options given twice (unless `multiple`), a missing or
 * empty value, and a value given to a flag are problems; the positionals are
 * still all returned, so the caller can show the usage of the command the
 * line names. A value that starts with `-` must be written `--name=-value`,
 * so `--project --user u` is "--project needs a value".
 */
export function parseArgv(
  argv: readonly string[],
  known: Readonly<Record<string, CliOption>>,
): ParsedArgv {
  const config = Object.fromEntries(
    Object.entries(known).map(([name, o]) => [
      name,
      {
        type: o.value ? ('string' as const) : ('boolean' as const),
        ...(o.short ? { short: o.short } : {}),
      },
    ]),
  );
  const { tokens } = parseArgs({
    args: [...argv],
    options: config,
    strict: false,
    allowPositionals: true,
    tokens: true,
  });
  const positionals: string[] = [];
  const rest: string[] = [];
  const options = new Map<string, string[] | true>();
  let problem: string | undefined;
  let terminated = false;
  const wrong = (text: string) => void (problem ??= text);
  for (const token of tokens) {
    if (token.kind === 'option-terminator') terminated = true;
    if (token.kind === 'positional') (terminated ? rest : positionals).push(token.value);
    if (token.kind !== 'option') continue;
    const spec = known[token.name];
    const flag = `--${token.name}`;
    const given = options.get(token.name);
    if (!spec) wrong(`Unknown option ${token.rawName}.`);
    else if (given !== undefined && !spec.multiple) wrong(`${flag} is given more than once.`);
    else if (!spec.value) {
      if (token.value !== undefined) wrong(`${flag} takes no value.`);
      else options.set(token.name, true);
    } else {
      const value = token.value;
      if (value === undefined || value === '' || (!token.inlineValue && value.startsWith('-')))
        wrong(`${flag} needs a value: ${flag} <${spec.value}>.`);
      else options.set(token.name, [...(Array.isArray(given) ? given : []), value]);
    }
  }
  return { positionals, rest, options, ...(problem === undefined ? {} : { problem }) };
}
