// Help texts: `basin --help`, `basin <group> --help` and
// `basin <group> <command> --help`, and the short usage shown after a usage
// error. Every text is built from the command declarations, so a new command
// or option appears in all of them.

import type { CliCommand, CliGroup, CliOption } from './command.js';
import { GLOBAL_OPTIONS } from './global-options.js';

const MAIN_USAGE =
  'Usage: basin [--data-dir <dir>] [--json] <group> <command> [arguments] [options]';

/** `basin login`, `basin service list`: how a command is called. */
export function commandPath(group: CliGroup, command: CliCommand): string {
  return group.standalone ? `basin ${group.name}` : `basin ${group.name} ${command.name}`;
}

/** A synopsis line: a standalone group's synopses start with its own name. */
const synopsisLine = (group: CliGroup, synopsis: string) =>
  group.standalone ? `basin ${synopsis}` : `basin ${group.name} ${synopsis}`;

export function mainHelp(groups: readonly CliGroup[]): string {
  return lines(
    MAIN_USAGE,
    '',
    'Administers a Basin data directory (project, user, credential): works on the',
    'same store as the server, also while the server runs. Drives the services of',
    'any Basin over its HTTP API (login, service, replica-set, vpc).',
    '',
    'Commands:',
    ...listing(groups.flatMap((g) => g.commands.map((c) => [g, c] as const))),
    '',
    ...optionsSection('Global options:', GLOBAL_OPTIONS),
    '',
    'Examples:',
    ...MAIN_EXAMPLES.map(indent),
    '',
    'The server bootstraps a "default" project and credential only into a data',
    'directory without projects; after `basin project create` it does not.',
    'Secrets are printed once, on standard output, and never written anywhere else.',
    EXIT_STATUS,
    'Run `basin <group> --help` or `basin <group> <command> --help` for more.',
  );
}

export function groupHelp(group: CliGroup): string {
  if (group.standalone) return commandHelp(group, group.commands[0] as CliCommand);
  const options = Object.assign({}, ...group.commands.map((c) => c.options)) as Record<
    string,
    CliOption
  >;
  return lines(
    `Usage: basin ${group.name} <${[...new Set(group.commands.map((c) => c.name.split(' ')[0]))].join('|')}> [arguments] [options]`,
    '',
    group.summary,
    '',
    'Commands:',
    ...listing(group.commands.map((c) => [group, c] as const)),
    '',
    ...(Object.keys(options).length > 0 ? [...optionsSection('Options:', options), ''] : []),
    ...optionsSection('Global options:', GLOBAL_OPTIONS),
    '',
    'Examples:',
    ...group.commands.flatMap((c) => c.examples).map(indent),
    '',
    EXIT_STATUS,
    `Run \`basin ${group.name} <command> --help\` for more about a command.`,
  );
}

export function commandHelp(group: CliGroup, command: CliCommand): string {
  return lines(
    ...synopses(group, command),
    '',
    command.details,
    '',
    ...(Object.keys(command.options).length > 0
      ? [...optionsSection('Options:', command.options), '']
      : []),
    ...optionsSection('Global options:', GLOBAL_OPTIONS),
    '',
    'Examples:',
    ...command.examples.map(indent),
    '',
    EXIT_STATUS,
  );
}

/** What follows a usage error: the synopses of what was being run, and where to read more. */
export function shortUsage(
  groups: readonly CliGroup[],
  about: { group?: CliGroup; command?: CliCommand },
): string {
  const { group, command } = about;
  if (group && command)
    return lines(
      ...synopses(group, command),
      '',
      `Run \`${commandPath(group, command)} --help\` for its options and examples.`,
    );
  if (group)
    return lines(
      `Usage: basin ${group.name} <command>`,
      '',
      ...listing(group.commands.map((c) => [group, c] as const)),
      '',
      `Run \`basin ${group.name} --help\` for options and examples.`,
    );
  return lines(
    MAIN_USAGE,
    '',
    ...listing(groups.flatMap((g) => g.commands.map((c) => [g, c] as const))),
    '',
    'Run `basin --help` for options and examples.',
  );
}

/** A first session, in order: what a new operator does. */
const MAIN_EXAMPLES = [
  'P=$(basin project create analytics)               # prints the new id',
  'basin credential create --project "$P" --name ci  # prints the keys, once',
  'U=$(basin user create alice --email alice@example.com)',
  'basin user add "$U" --project "$P"',
  'basin credential create --user "$U"               # a token for all her projects',
  'basin --data-dir /var/lib/basin credential list',
  'basin credential revoke <credential_id>',
  'basin login --url http://127.0.0.1:8080 --key "$KEY"',
  'basin service create metrics --cpu 1000 --memory 4 --wait',
  'basin service list',
];

const EXIT_STATUS = 'Exit status: 0 done; 1 failed (the message says why); 2 bad usage.';

function synopses(group: CliGroup, command: CliCommand): string[] {
  return command.usage.map(
    ([synopsis], i) => `${i === 0 ? 'Usage:' : '      '} ${synopsisLine(group, synopsis)}`,
  );
}

/** Synopses and summaries in two columns; a long synopsis gets a line of its own. */
function listing(entries: readonly (readonly [CliGroup, CliCommand])[]): string[] {
  const rows = entries.flatMap(([g, c]) =>
    c.usage.map(([synopsis, summary]) => [synopsisLine(g, synopsis), summary] as const),
  );
  const width = Math.max(...rows.map(([s]) => s.length).filter((n) => n <= 44));
  return rows.map(([s, summary]) =>
    s.length > width
      ? `  ${s}\n  ${' '.repeat(width)}  ${summary}`
      : `  ${s.padEnd(width)}  ${summary}`,
  );
}

function optionsSection(title: string, options: Readonly<Record<string, CliOption>>): string[] {
  const rows = Object.entries(options).map(([name, o]) => {
    const names = `${o.short ? `-${o.short}, ` : ''}--${name}${o.value ? ` <${o.value}>` : ''}`;
    return [names, o.help.split('\n')] as const;
  });
  const width = Math.max(...rows.map(([n]) => n.length));
  return [
    title,
    ...rows.flatMap(([names, help]) =>
      help.map((h, i) => `  ${(i === 0 ? names : '').padEnd(width)}  ${h}`),
    ),
  ];
}

function indent(text: string): string {
  return `  ${text}`;
}

function lines(...ls: string[]): string {
  return `${ls.join('\n')}\n`;
}
