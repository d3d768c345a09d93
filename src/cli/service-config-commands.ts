// `basin service ha|pooler|update-password|environment`: the configuration
// of a service beside its size, each one API call (setHA, enablePooler and
// disablePooler, updatePassword, setEnvironment). The vendor CLI's verb
// where it has one: `update-password` with `--new-password` and
// `--auto-generate`.

import { randomBytes } from 'node:crypto';
import {
  apiCommand,
  checkCount,
  checkEnvironment,
  parseEnvironment,
  servicePath,
} from './api-command.js';
import type { ApiCommand, ApiContext } from './command.js';
import { checkOutput, printService, wantsJson } from './service-format.js';
import { waitIfAsked, WAIT_OPTION } from './service-wait.js';

const one = '/v1/projects/{project_id}/services/{service_id}' as const;

/** An API answer `{message}`: the body as JSON, or the message as a line. */
export function printMessage(c: ApiContext, body: { message?: string }): void {
  if (wantsJson(c)) c.print(body);
  else c.out(`${body.message ?? 'Done.'}\n`);
}

const haCommand = apiCommand({
  name: 'ha',
  args: ['service_id'],
  options: {
    replicas: { value: 'count', help: 'HA replicas (0 for none)' },
    'sync-replicas': {
      value: 'count',
      help: 'how many of them are synchronous (default: as now, at most the replicas)',
    },
    ...WAIT_OPTION('it is READY'),
  },
  usage: [
    [
      'ha <service_id> [--replicas <count>] [--sync-replicas <count>] [--wait]',
      'change the HA replicas of a service',
    ],
  ],
  details: [
    'Sets how many HA replicas a service has, and how many of them are synchronous',
    '(setHA): CONFIGURING, then READY. Give --replicas, --sync-replicas or both.',
  ].join('\n'),
  examples: [
    'basin service ha d1k5vk7hf2 --replicas 2 --sync-replicas 1 --wait',
    'basin service ha d1k5vk7hf2 --replicas 0',
  ],
  check: (opt) =>
    checkOutput(opt) ??
    checkCount('replicas', opt('replicas')) ??
    checkCount('sync-replicas', opt('sync-replicas')) ??
    (opt('replicas') === undefined && opt('sync-replicas') === undefined
      ? 'Give --replicas <count>, --sync-replicas <count> or both.'
      : undefined),
  async run(c) {
    const count = (name: string) => (c.opt(name) === undefined ? undefined : Number(c.opt(name)));
    const replicas = count('replicas');
    const sync = count('sync-replicas');
    const svc = await c.api.POST(`${one}/setHA`, {
      ...servicePath(c, c.args[0] as string),
      body: {
        ...(replicas === undefined ? {} : { replica_count: replicas }),
        ...(sync === undefined ? {} : { sync_replica_count: sync }),
      },
    });
    printService(c, await waitIfAsked(c, svc, 'READY'));
  },
});

const poolerCommand = (action: 'enable' | 'disable') =>
  apiCommand({
    name: `pooler ${action}`,
    args: ['service_id'],
    options: WAIT_OPTION('it is READY again, the pooler configured'),
    usage: [
      [
        `pooler ${action} <service_id> [--wait]`,
        action === 'enable'
          ? "enable a service's connection pooler"
          : "disable a service's connection pooler",
      ],
    ],
    details:
      action === 'enable'
        ? [
            'Enables the connection pooler (PgBouncer) of a service: its endpoint is in',
            '`basin service get` (POOLER), transaction pooling as tsdbadmin to tsdb.',
          ].join('\n')
        : 'Disables the connection pooler of a service; its port is kept for a later enable.',
    examples: [`basin service pooler ${action} d1k5vk7hf2 --wait`],
    check: checkOutput,
    async run(c) {
      const id = c.args[0] as string;
      const path = action === 'enable' ? `${one}/enablePooler` : `${one}/disablePooler`;
      const body = await c.api.POST(path as `${typeof one}/enablePooler`, servicePath(c, id));
      if (c.flag('wait')) {
        printService(c, await waitIfAsked(c, { project_id: c.projectId, service_id: id }, 'READY'));
      } else printMessage(c, body);
    },
  });

const PASSWORD_ENV = 'BASIN_NEW_PASSWORD';

const updatePasswordCommand = apiCommand({
  name: 'update-password',
  args: ['service_id'],
  options: {
    'new-password': {
      value: 'password',
      help: `the new password of tsdbadmin (or ${PASSWORD_ENV}, which keeps it out of the shell's history)`,
    },
    'auto-generate': { help: 'generate a strong password, and print it (once)' },
    ...WAIT_OPTION('it is READY, the password in force'),
  },
  usage: [
    [
      'update-password <service_id> (--new-password <password> | --auto-generate) [--wait]',
      "set the password of a service's tsdbadmin",
    ],
  ],
  details: [
    "Sets the password of the service's tsdbadmin (updatePassword); Basin keeps only",
    `its SCRAM verifier. The password comes from --new-password, ${PASSWORD_ENV}, or`,
    '--auto-generate, which prints the password it made: it is shown this once.',
  ].join('\n'),
  examples: [
    `${PASSWORD_ENV}='…' basin service update-password d1k5vk7hf2`,
    'basin service update-password d1k5vk7hf2 --auto-generate --output json',
  ],
  check: (opt, { env, flag }) =>
    checkOutput(opt) ??
    (opt('new-password') !== undefined && flag('auto-generate')
      ? 'Give either --new-password or --auto-generate, not both.'
      : opt('new-password') === undefined && !flag('auto-generate') && !env[PASSWORD_ENV]
        ? `Give the new password: --new-password <password>, ${PASSWORD_ENV}, or --auto-generate.`
        : undefined),
  async run(c) {
    const id = c.args[0] as string;
    const generated = c.flag('auto-generate');
    const password = generated
      ? randomBytes(24).toString('base64url')
      : ((c.opt('new-password') ?? c.env[PASSWORD_ENV]) as string);
    await c.api.POST(`${one}/updatePassword`, { ...servicePath(c, id), body: { password } });
    if (c.flag('wait')) await waitIfAsked(c, { project_id: c.projectId, service_id: id }, 'READY');
    if (wantsJson(c)) c.print({ service_id: id, ...(generated ? { password } : {}) });
    else {
      c.out(`Updated the password of tsdbadmin on ${id}.\n`);
      if (generated) c.out(`Password: ${password}\n`);
    }
    if (generated && !wantsJson(c)) c.note('The password is shown only now.\n');
  },
});

const environmentCommand = apiCommand({
  name: 'environment',
  args: ['service_id', 'environment'],
  usage: [['environment <service_id> <DEV|PROD>', "set a service's environment tag"]],
  details: 'Tags a service DEV or PROD (setEnvironment); nothing else changes.',
  examples: ['basin service environment d1k5vk7hf2 PROD'],
  check: (opt, { args }) => checkOutput(opt) ?? checkEnvironment(args[1]),
  async run(c) {
    const environment = parseEnvironment(c.args[1] as string) as 'DEV' | 'PROD';
    const body = await c.api.POST(`${one}/setEnvironment`, {
      ...servicePath(c, c.args[0] as string),
      body: { environment },
    });
    printMessage(c, body);
  },
});

export const serviceConfigCommands: ApiCommand[] = [
  haCommand,
  poolerCommand('enable'),
  poolerCommand('disable'),
  updatePasswordCommand,
  environmentCommand,
];
