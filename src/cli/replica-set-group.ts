// `basin replica-set …`: the read replica sets of a service, every operation
// the API has for them (create, list, resize, delete, the pooler, the
// environment; get is the list's entry, the API having no GET of one). A
// replica set is also readable as a service (GET /services/{replica_set_id}),
// which is what --wait polls: CONFIGURING while it is made or resized, READY
// when active, gone once deleted.

import type { ReadReplicaSet } from '../client/index.js';
import {
  apiCommand,
  checkCount,
  checkEnvironment,
  parseEnvironment,
  servicePath,
} from './api-command.js';
import { CliFailure } from './cli-failure.js';
import type { ApiContext, CliGroup, CliOption } from './command.js';
import { printMessage } from './service-config-commands.js';
import { checkOutput, wantsJson } from './service-format.js';
import { waitIfAsked, WAIT_OPTION } from './service-wait.js';
import { fieldLines, table } from './table.js';

const sets = '/v1/projects/{project_id}/services/{service_id}/replicaSets' as const;
const one = `${sets}/{replica_set_id}` as const;

const SIZE_OPTIONS: Record<string, CliOption> = {
  cpu: { value: 'millicores', help: 'CPU in millicores of each node (e.g. 1000)' },
  memory: { value: 'gigabytes', help: 'memory in gigabytes of each node (e.g. 4)' },
};

const setPath = (c: ApiContext) => ({
  params: {
    path: {
      project_id: c.projectId,
      service_id: c.args[0] as string,
      replica_set_id: c.args[1] as string,
    },
  },
});

const endpoint = (e: { host: string; port: number } | undefined) =>
  e ? `${e.host}:${e.port}` : undefined;
const size = (r: ReadReplicaSet) =>
  r.cpu_millis === undefined ? undefined : `${r.cpu_millis}m/${r.memory_gbs}GB`;

export function replicaSetTable(list: readonly ReadReplicaSet[]): string {
  return table(
    ['ID', 'NAME', 'STATUS', 'NODES', 'SIZE', 'ENDPOINT', 'POOLER'],
    list.map((r) => [
      r.id ?? '-',
      r.name ?? '-',
      r.status ?? '-',
      String(r.nodes ?? '-'),
      size(r) ?? '-',
      endpoint(r.endpoint) ?? '-',
      endpoint(r.connection_pooler?.endpoint) ?? '-',
    ]),
  );
}

function printSet(c: ApiContext, r: ReadReplicaSet): void {
  if (wantsJson(c)) c.print(r);
  else
    c.out(
      fieldLines([
        ['ID', r.id],
        ['NAME', r.name],
        ['STATUS', r.status],
        ['NODES', r.nodes],
        ['SIZE', size(r)],
        ['ENDPOINT', endpoint(r.endpoint)],
        ['POOLER', endpoint(r.connection_pooler?.endpoint)],
        ['ENVIRONMENT', r.metadata?.environment],
      ]),
    );
}

/** The replica set as the list has it; a failure naming it when it is not there. */
async function find(c: ApiContext, serviceId: string, id: string): Promise<ReadReplicaSet> {
  const list = await c.api.GET(sets, servicePath(c, serviceId));
  const found = list.find((r) => r.id === id);
  if (!found)
    throw new CliFailure(`Read replica set ${id} not found on service ${serviceId}. (NOT_FOUND)`);
  return found;
}

/** --wait: until the set is active (READY through the service view), then as the list has it. */
async function settled(c: ApiContext, serviceId: string, id: string, r: ReadReplicaSet) {
  if (!c.flag('wait')) return r;
  await waitIfAsked(c, { project_id: c.projectId, service_id: id }, 'READY');
  return find(c, serviceId, id);
}

const poolerCommand = (action: 'enable' | 'disable') =>
  apiCommand({
    name: `pooler ${action}`,
    args: ['service_id', 'replica_set_id'],
    usage: [
      [
        `pooler ${action} <service_id> <replica_set_id>`,
        `${action} the connection pooler of a read replica set`,
      ],
    ],
    details:
      action === 'enable'
        ? 'Enables the connection pooler of a read replica set: its endpoint is POOLER in `get`.'
        : 'Disables the connection pooler of a read replica set.',
    examples: [`basin replica-set pooler ${action} d1k5vk7hf2 r8a1b2c3d4`],
    check: checkOutput,
    async run(c) {
      const path = action === 'enable' ? `${one}/enablePooler` : `${one}/disablePooler`;
      printMessage(c, await c.api.POST(path as `${typeof one}/enablePooler`, setPath(c)));
    },
  });

export const replicaSetGroup: CliGroup = {
  name: 'replica-set',
  summary: [
    'Read replica sets of a service: streaming standbys behind an endpoint of their',
    'own, for reads (over the HTTP API, as `basin login` set up).',
  ].join('\n'),
  commands: [
    apiCommand({
      name: 'create',
      args: ['service_id'],
      options: {
        name: { value: 'name', help: 'the name of the replica set' },
        nodes: { value: 'count', help: 'how many nodes (default 1)' },
        ...SIZE_OPTIONS,
        ...WAIT_OPTION('it is active'),
      },
      usage: [
        [
          'create <service_id> --name <name> --cpu <millicores> --memory <gigabytes> [--nodes <count>] [--wait]',
          'add a read replica set to a service',
        ],
      ],
      details: [
        'Adds a read replica set to a READY service: `creating`, then `active`, when its',
        'endpoint answers reads. Every node has the size given.',
      ].join('\n'),
      examples: [
        'basin replica-set create d1k5vk7hf2 --name reports --cpu 1000 --memory 4 --nodes 2 --wait',
      ],
      check: (opt) =>
        checkOutput(opt) ??
        checkCount('nodes', opt('nodes')) ??
        checkCount('cpu', opt('cpu')) ??
        checkCount('memory', opt('memory')) ??
        (opt('name') === undefined || opt('cpu') === undefined || opt('memory') === undefined
          ? 'Give --name <name>, --cpu <millicores> and --memory <gigabytes>.'
          : undefined),
      async run(c) {
        const serviceId = c.args[0] as string;
        const made = await c.api.POST(sets, {
          ...servicePath(c, serviceId),
          body: {
            name: c.opt('name') as string,
            nodes: Number(c.opt('nodes') ?? 1),
            cpu_millis: Number(c.opt('cpu')),
            memory_gbs: Number(c.opt('memory')),
          },
        });
        printSet(c, await settled(c, serviceId, made.id as string, made));
      },
    }),
    apiCommand({
      name: 'list',
      args: ['service_id'],
      usage: [['list <service_id>', 'list the read replica sets of a service']],
      details:
        'Lists the read replica sets of a service: id, name, status, nodes, size, endpoints.',
      examples: [
        'basin replica-set list d1k5vk7hf2',
        'basin replica-set list d1k5vk7hf2 --output json',
      ],
      check: checkOutput,
      async run(c) {
        const list = await c.api.GET(sets, servicePath(c, c.args[0] as string));
        if (wantsJson(c)) c.print(list);
        else c.out(replicaSetTable(list));
      },
    }),
    apiCommand({
      name: 'get',
      args: ['service_id', 'replica_set_id'],
      usage: [['get <service_id> <replica_set_id>', 'show a read replica set']],
      details: 'Shows a read replica set: status, nodes, size, endpoints, environment.',
      examples: ['basin replica-set get d1k5vk7hf2 r8a1b2c3d4'],
      check: checkOutput,
      async run(c) {
        printSet(c, await find(c, c.args[0] as string, c.args[1] as string));
      },
    }),
    apiCommand({
      name: 'resize',
      args: ['service_id', 'replica_set_id'],
      options: { ...SIZE_OPTIONS, ...WAIT_OPTION('it is active') },
      usage: [
        [
          'resize <service_id> <replica_set_id> --cpu <millicores> --memory <gigabytes> [--wait]',
          'change the size of its nodes',
        ],
      ],
      details: 'Resizes every node of an active read replica set: `resizing`, then `active`.',
      examples: ['basin replica-set resize d1k5vk7hf2 r8a1b2c3d4 --cpu 2000 --memory 8 --wait'],
      check: (opt) =>
        checkOutput(opt) ??
        (opt('cpu') === undefined || opt('memory') === undefined
          ? 'Give the new size: --cpu <millicores> --memory <gigabytes>.'
          : undefined),
      async run(c) {
        const [serviceId, id] = c.args as [string, string];
        const body = await c.api.POST(`${one}/resize`, {
          ...setPath(c),
          body: { cpu_millis: c.opt('cpu') as string, memory_gbs: c.opt('memory') as string },
        });
        if (c.flag('wait'))
          printSet(c, await settled(c, serviceId, id, await find(c, serviceId, id)));
        else printMessage(c, body);
      },
    }),
    apiCommand({
      name: 'delete',
      args: ['service_id', 'replica_set_id'],
      options: WAIT_OPTION('it is gone'),
      usage: [['delete <service_id> <replica_set_id> [--wait]', 'delete a read replica set']],
      details: 'Deletes a read replica set (`deleting`, then gone); the service is untouched.',
      examples: ['basin replica-set delete d1k5vk7hf2 r8a1b2c3d4 --wait'],
      check: checkOutput,
      async run(c) {
        const id = c.args[1] as string;
        await c.api.DELETE(one, setPath(c));
        if (c.flag('wait'))
          await waitIfAsked(c, { project_id: c.projectId, service_id: id }, 'DELETED');
        const status = c.flag('wait') ? 'deleted' : 'deleting';
        if (wantsJson(c)) c.print({ id, status });
        else c.out(`${status === 'deleted' ? 'Deleted' : 'Deleting'} ${id}.\n`);
      },
    }),
    poolerCommand('enable'),
    poolerCommand('disable'),
    apiCommand({
      name: 'environment',
      args: ['service_id', 'replica_set_id', 'environment'],
      usage: [
        [
          'environment <service_id> <replica_set_id> <DEV|PROD>',
          "set a read replica set's environment tag",
        ],
      ],
      details: 'Tags a read replica set DEV or PROD; nothing else changes.',
      examples: ['basin replica-set environment d1k5vk7hf2 r8a1b2c3d4 PROD'],
      check: (opt, { args }) => checkOutput(opt) ?? checkEnvironment(args[2]),
      async run(c) {
        const environment = parseEnvironment(c.args[2] as string) as 'DEV' | 'PROD';
        printMessage(
          c,
          await c.api.POST(`${one}/setEnvironment`, { ...setPath(c), body: { environment } }),
        );
      },
    }),
  ],
};
