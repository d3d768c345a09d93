// `basin service …`: drive services of any Basin over HTTP, through the
// typed client (src/client), as `basin login` set up. Every command maps to
// one API call (plus polling for --wait); the API's own messages are what a
// failure prints.

import type { ServiceCreateInput } from '../client/index.js';
import { parseServiceType } from '../domain/service-type-names.js';
import { apiCommand, checkCount, servicePath } from './api-command.js';
import type { ApiContext, CliGroup, CliOption } from './command.js';
import { checkOutput, printService, serviceTable, wantsJson } from './service-format.js';
import { serviceConfigCommands } from './service-config-commands.js';
import { serviceLogsCommand } from './service-logs.js';
import { servicePsqlCommand } from './service-psql.js';
import { waitIfAsked, WAIT_OPTION } from './service-wait.js';

const SIZE_OPTIONS: Record<string, CliOption> = {
  cpu: { value: 'millicores', help: 'CPU in millicores (e.g. 1000), or shared' },
  memory: { value: 'gigabytes', help: 'memory in gigabytes (e.g. 4), or shared' },
};

const one = '/v1/projects/{project_id}/services/{service_id}' as const;

/** The size fields of a create, fork or resize, from --cpu and --memory. */
const sizeOf = (c: ApiContext) => ({
  ...(c.opt('cpu') === undefined ? {} : { cpu_millis: c.opt('cpu') as string }),
  ...(c.opt('memory') === undefined ? {} : { memory_gbs: c.opt('memory') as string }),
});

const environmentOf = (c: ApiContext) => {
  const e = c.opt('environment');
  return e === undefined ? {} : { environment_tag: e.toUpperCase() as 'DEV' | 'PROD' };
};

/** --type: a service type under either name of time-series (domain/service-type-names.ts). */
const checkType = (type: string | undefined) =>
  type === undefined || parseServiceType(type) !== undefined
    ? undefined
    : `--type must be TIMESERIESDB (or TIMESCALEDB), POSTGRES or VECTOR; got ${type}.`;

const command = apiCommand;

/** start and stop: the same shape, opposite directions. */
const runningCommand = (action: 'start' | 'stop') =>
  command({
    name: action,
    args: ['service_id'],
    options: WAIT_OPTION(action === 'start' ? 'it is READY' : 'it is PAUSED'),
    usage: [
      [
        `${action} <service_id> [--wait]`,
        action === 'start' ? 'start a stopped service' : 'stop a running service',
      ],
    ],
    details:
      action === 'start'
        ? 'Starts a PAUSED service: RESUMING, then READY.'
        : 'Stops a READY service: PAUSING, then PAUSED. Its data stays.',
    examples: [`basin service ${action} d1k5vk7hf2 --wait`],
    check: checkOutput,
    async run(c) {
      const id = c.args[0] as string;
      const path = action === 'start' ? `${one}/start` : `${one}/stop`;
      const svc = await c.api.POST(path as `${typeof one}/start`, servicePath(c, id));
      printService(c, await waitIfAsked(c, svc, action === 'start' ? 'READY' : 'PAUSED'));
    },
  });

export const serviceGroup: CliGroup = {
  name: 'service',
  summary: [
    'Database services of a Basin, over its HTTP API (run `basin login` first):',
    'works against any Basin, not only the one on this machine.',
  ].join('\n'),
  commands: [
    command({
      name: 'list',
      args: [],
      options: {
        type: {
          value: 'type',
          help: 'only services of this type: TIMESERIESDB or TIMESCALEDB (the same), POSTGRES, VECTOR',
        },
      },
      usage: [['list [--type <type>]', 'list the services of the project']],
      details: [
        'Lists the services of the project: id, name, status, type, region, size, endpoint.',
        '--type takes either name of the time-series type, whichever the Basin answers with.',
      ].join('\n'),
      examples: [
        'basin service list',
        'basin service list --type TIMESCALEDB',
        'basin service list --output json | jq -r .[].service_id',
      ],
      check: (opt) => checkOutput(opt) ?? checkType(opt('type')),
      async run(c) {
        const all = await c.api.GET('/v1/projects/{project_id}/services', {
          params: { path: { project_id: c.projectId } },
        });
        const type = c.opt('type');
        const wanted = type === undefined ? undefined : parseServiceType(type);
        const services =
          wanted === undefined
            ? all
            : all.filter((s) => parseServiceType(s.service_type ?? '') === wanted);
        if (wantsJson(c)) c.print(services);
        else c.out(serviceTable(services));
      },
    }),
    command({
      name: 'get',
      args: ['service_id'],
      usage: [['get <service_id>', 'show a service']],
      details: 'Shows a service: status, size, endpoints, HA, metrics.',
      examples: ['basin service get d1k5vk7hf2', 'basin service get d1k5vk7hf2 --output json'],
      check: checkOutput,
      async run(c) {
        printService(c, await c.api.GET(one, servicePath(c, c.args[0] as string)));
      },
    }),
    command({
      name: 'create',
      args: ['name'],
      options: {
        ...SIZE_OPTIONS,
        addons: {
          value: 'list',
          help: 'time-series, ai, both (time-series,ai) or none (default time-series)',
        },
        region: { value: 'region_code', help: "the region (default: the installation's)" },
        environment: { value: 'DEV|PROD', help: 'the environment tag (default DEV)' },
        replicas: { value: 'count', help: 'HA replicas (default 0)' },
        ...WAIT_OPTION('it is READY'),
      },
      usage: [
        [
          'create <name> [--cpu <millicores> --memory <gigabytes>] [--addons <list>] [--wait]',
          'create a service; prints it, with its initial password (shown once)',
        ],
      ],
      details: [
        'Creates a service. The answer holds its initial password for tsdbadmin,',
        'shown this once. Without a size, the smallest dedicated size; `--cpu shared',
        '--memory shared` for a shared one. With --wait, returns once it is READY.',
      ].join('\n'),
      examples: [
        'basin service create metrics --cpu 1000 --memory 4 --wait',
        'basin service create scratch --addons none --cpu shared --memory shared',
        'S=$(basin service create metrics --output json | jq -r .service_id)',
      ],
      check: (opt) => checkOutput(opt) ?? checkCount('replicas', opt('replicas')),
      async run(c) {
        const addons = c.opt('addons');
        const body: ServiceCreateInput = {
          name: c.args[0] as string,
          ...sizeOf(c),
          ...environmentOf(c),
          ...(addons === undefined ? {} : { addons: parseAddons(addons) }),
          ...(c.opt('region') === undefined ? {} : { region_code: c.opt('region') as string }),
          ...(c.opt('replicas') === undefined ? {} : { replica_count: Number(c.opt('replicas')) }),
        };
        const created = await c.api.POST('/v1/projects/{project_id}/services', {
          params: { path: { project_id: c.projectId } },
          body,
        });
        const ready = await waitIfAsked(c, created, 'READY');
        // The password is in the create's answer only: keep it for the output.
        printService(c, { ...ready, initial_password: created.initial_password });
        if (!wantsJson(c)) c.note('The initial password is shown only now.\n');
      },
    }),
    command({
      name: 'delete',
      args: ['service_id'],
      options: WAIT_OPTION('it is gone'),
      usage: [['delete <service_id> [--wait]', 'delete a service and its read replica sets']],
      details: 'Deletes a service (DELETING, then gone) with its read replica sets; forks stay.',
      examples: ['basin service delete d1k5vk7hf2 --wait'],
      check: checkOutput,
      async run(c) {
        const id = c.args[0] as string;
        await c.api.DELETE(one, servicePath(c, id));
        const gone = c.flag('wait')
          ? (await waitIfAsked(c, { project_id: c.projectId, service_id: id }, 'DELETED'),
            'DELETED')
          : 'DELETING';
        if (wantsJson(c)) c.print({ service_id: id, status: gone });
        else c.out(gone === 'DELETED' ? `Deleted ${id}.\n` : `Deleting ${id}.\n`);
      },
    }),
    runningCommand('start'),
    runningCommand('stop'),
    command({
      name: 'resize',
      args: ['service_id'],
      options: { ...SIZE_OPTIONS, ...WAIT_OPTION('it is READY') },
      usage: [
        [
          'resize <service_id> --cpu <millicores> --memory <gigabytes> [--wait]',
          'change CPU and memory',
        ],
      ],
      details: 'Resizes a READY service to a size of the catalogue (CONFIGURING, then READY).',
      examples: ['basin service resize d1k5vk7hf2 --cpu 2000 --memory 8 --wait'],
      check: (opt) =>
        checkOutput(opt) ??
        (opt('cpu') === undefined || opt('memory') === undefined
          ? 'Give the new size: --cpu <millicores> --memory <gigabytes>.'
          : undefined),
      async run(c) {
        const id = c.args[0] as string;
        const svc = await c.api.POST(`${one}/resize`, {
          ...servicePath(c, id),
          body: { cpu_millis: c.opt('cpu') as string, memory_gbs: c.opt('memory') as string },
        });
        printService(c, await waitIfAsked(c, svc, 'READY'));
      },
    }),
    command({
      name: 'fork',
      args: ['service_id'],
      options: {
        strategy: { value: 'NOW|LAST_SNAPSHOT|PITR', help: 'what to copy (default NOW)' },
        'target-time': { value: 'time', help: 'for PITR: the moment to recover, RFC 3339' },
        name: { value: 'name', help: 'the name of the fork (default <parent>-fork)' },
        ...SIZE_OPTIONS,
        environment: { value: 'DEV|PROD', help: 'the environment tag (default DEV)' },
        ...WAIT_OPTION('the fork is READY'),
      },
      usage: [
        [
          'fork <service_id> [--strategy <strategy>] [--target-time <time>] [--name <name>] [--wait]',
          'fork a service into a new one; prints it, with its password (shown once)',
        ],
      ],
      details: [
        'Makes a new, independent service from a READY one: NOW copies it as it is,',
        'LAST_SNAPSHOT its newest backup, PITR the moment --target-time.',
      ].join('\n'),
      examples: [
        'basin service fork d1k5vk7hf2 --wait',
        'basin service fork d1k5vk7hf2 --strategy PITR --target-time 2025-01-01T12:00:00Z',
      ],
      check: checkOutput,
      async run(c) {
        const strategy = (c.opt('strategy') ?? 'NOW').toUpperCase();
        const fork = await c.api.POST(`${one}/forkService`, {
          ...servicePath(c, c.args[0] as string),
          body: {
            fork_strategy: strategy as 'NOW',
            ...(c.opt('target-time') === undefined
              ? {}
              : { target_time: c.opt('target-time') as string }),
            ...(c.opt('name') === undefined ? {} : { name: c.opt('name') as string }),
            ...sizeOf(c),
            ...environmentOf(c),
          },
        });
        const ready = await waitIfAsked(c, fork, 'READY');
        printService(c, { ...ready, initial_password: fork.initial_password });
        if (!wantsJson(c)) c.note('The initial password of the fork is shown only now.\n');
      },
    }),
    command({
      name: 'rename',
      args: ['service_id', 'name'],
      usage: [['rename <service_id> <name>', 'rename a service']],
      details: 'Gives a service a new name (1 to 128 characters); nothing else changes.',
      examples: ['basin service rename d1k5vk7hf2 metrics-eu'],
      check: checkOutput,
      async run(c) {
        const svc = await c.api.POST(`${one}/rename`, {
          ...servicePath(c, c.args[0] as string),
          body: { name: c.args[1] as string },
        });
        printService(c, svc);
      },
    }),
    ...serviceConfigCommands,
    serviceLogsCommand,
    servicePsqlCommand,
  ],
};

function parseAddons(text: string): ('time-series' | 'ai')[] {
  if (text === 'none') return [];
  return text.split(',').map((a) => a.trim()) as ('time-series' | 'ai')[];
}
