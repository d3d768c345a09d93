// `basin vpc …`: the project's VPCs and their peerings, and attaching a
// service to one (attachToVPC, detachFromVPC: asynchronous, the service
// CONFIGURING, then READY in its new network). Peerings are `basin vpc
// peering create|list|get|delete`.

import { setTimeout as sleep } from 'node:timers/promises';
import type { Peering, Vpc } from '../client/index.js';
import { apiCommand, servicePath } from './api-command.js';
import { CliFailure } from './cli-failure.js';
import type { ApiContext, CliGroup } from './command.js';
import { printMessage } from './service-config-commands.js';
import { checkOutput, printService, wantsJson } from './service-format.js';
import { waitIfAsked, WAIT_OPTION } from './service-wait.js';
import { fieldLines, table } from './table.js';

const vpcs = '/v1/projects/{project_id}/vpcs' as const;
const one = `${vpcs}/{vpc_id}` as const;
const peerings = `${one}/peerings` as const;
const service = '/v1/projects/{project_id}/services/{service_id}' as const;

const vpcPath = (c: ApiContext) => ({
  params: { path: { project_id: c.projectId, vpc_id: c.args[0] as string } },
});
const peeringPath = (c: ApiContext) => ({
  params: {
    path: { project_id: c.projectId, vpc_id: c.args[0] as string, peering_id: c.args[1] as string },
  },
});

function printVpc(c: ApiContext, v: Vpc): void {
  if (wantsJson(c)) c.print(v);
  else
    c.out(
      fieldLines([
        ['ID', v.id],
        ['NAME', v.name],
        ['CIDR', v.cidr],
        ['REGION', v.region_code],
      ]),
    );
}

function printPeering(c: ApiContext, p: Peering): void {
  if (wantsJson(c)) c.print(p);
  else
    c.out(
      fieldLines([
        ['ID', p.id],
        ['STATUS', p.status],
        ['PEER VPC', p.peer_vpc_id],
        ['PEER ACCOUNT', p.peer_account_id],
        ['PEER REGION', p.peer_region_code],
        ['ERROR', p.error_message],
      ]),
    );
}

/** --wait of a peering: polls it, backing off, until it is no longer pending (10 minutes at most). */
async function settledPeering(c: ApiContext, vpcId: string, p: Peering): Promise<Peering> {
  const path = {
    params: { path: { project_id: c.projectId, vpc_id: vpcId, peering_id: p.id as string } },
  };
  const deadline = Date.now() + 600_000;
  let pause = 200;
  let seen = p;
  while (seen.status === 'pending') {
    if (Date.now() > deadline)
      throw new CliFailure(`Peering ${p.id} is still pending after 10 minutes. (WAIT_TIMEOUT)`);
    await sleep(pause);
    pause = Math.min(pause * 1.5, 5_000);
    seen = await c.api.GET(`${peerings}/{peering_id}`, path);
  }
  if (seen.status !== 'active')
    throw new CliFailure(
      `Peering ${p.id} is ${seen.status}: ${seen.error_message ?? 'no reason given'}. (WAIT_FAILED)`,
    );
  return seen;
}

/** attach and detach: the same shape, opposite directions. */
const membershipCommand = (action: 'attach' | 'detach') =>
  apiCommand({
    name: action,
    args: ['vpc_id', 'service_id'],
    options: WAIT_OPTION('the service is READY in its new network'),
    usage: [
      [
        `${action} <vpc_id> <service_id> [--wait]`,
        action === 'attach' ? 'attach a service to a VPC' : 'detach a service from its VPC',
      ],
    ],
    details:
      action === 'attach'
        ? [
            'Attaches a service to a VPC of its project and region: it is then reached from',
            "the VPC's CIDR and its peers' only. A service is in one VPC at most.",
          ].join('\n')
        : 'Detaches a service from its VPC: it is reached from the public endpoint again.',
    examples: [`basin vpc ${action} v7q2m4n8p1 d1k5vk7hf2 --wait`],
    check: checkOutput,
    async run(c) {
      const [vpcId, serviceId] = c.args as [string, string];
      const path = action === 'attach' ? `${service}/attachToVPC` : `${service}/detachFromVPC`;
      const body = await c.api.POST(path as `${typeof service}/attachToVPC`, {
        ...servicePath(c, serviceId),
        body: { vpc_id: vpcId },
      });
      if (c.flag('wait'))
        printService(
          c,
          await waitIfAsked(c, { project_id: c.projectId, service_id: serviceId }, 'READY'),
        );
      else printMessage(c, body);
    },
  });

export const vpcGroup: CliGroup = {
  name: 'vpc',
  summary: [
    "VPCs of the project: private networks a service joins, reached from the VPC's",
    'CIDR and its peerings only (over the HTTP API, as `basin login` set up).',
  ].join('\n'),
  commands: [
    apiCommand({
      name: 'create',
      args: [],
      options: {
        name: { value: 'name', help: 'the name of the VPC' },
        cidr: { value: 'cidr', help: 'its IPv4 block, e.g. 10.0.0.0/16' },
        region: { value: 'region_code', help: 'its region (a service joins a VPC of its own)' },
      },
      usage: [['create --name <name> --cidr <cidr> --region <region_code>', 'create a VPC']],
      details: 'Creates a VPC in the project.',
      examples: ['basin vpc create --name private --cidr 10.0.0.0/16 --region us-east-1'],
      check: (opt) =>
        checkOutput(opt) ??
        (opt('name') === undefined || opt('cidr') === undefined || opt('region') === undefined
          ? 'Give --name <name>, --cidr <cidr> and --region <region_code>.'
          : undefined),
      async run(c) {
        const vpc = await c.api.POST(vpcs, {
          params: { path: { project_id: c.projectId } },
          body: {
            name: c.opt('name') as string,
            cidr: c.opt('cidr') as string,
            region_code: c.opt('region') as string,
          },
        });
        printVpc(c, vpc);
      },
    }),
    apiCommand({
      name: 'list',
      args: [],
      usage: [['list', 'list the VPCs of the project']],
      details: 'Lists the VPCs of the project: id, name, CIDR, region.',
      examples: ['basin vpc list', 'basin vpc list --output json'],
      check: checkOutput,
      async run(c) {
        const list = await c.api.GET(vpcs, { params: { path: { project_id: c.projectId } } });
        if (wantsJson(c)) c.print(list);
        else
          c.out(
            table(
              ['ID', 'NAME', 'CIDR', 'REGION'],
              list.map((v) => [v.id ?? '-', v.name ?? '-', v.cidr ?? '-', v.region_code ?? '-']),
            ),
          );
      },
    }),
    apiCommand({
      name: 'get',
      args: ['vpc_id'],
      usage: [['get <vpc_id>', 'show a VPC']],
      details: 'Shows a VPC: name, CIDR, region.',
      examples: ['basin vpc get v7q2m4n8p1'],
      check: checkOutput,
      async run(c) {
        printVpc(c, await c.api.GET(one, vpcPath(c)));
      },
    }),
    apiCommand({
      name: 'rename',
      args: ['vpc_id', 'name'],
      usage: [['rename <vpc_id> <name>', 'rename a VPC']],
      details: 'Gives a VPC a new name; nothing else changes.',
      examples: ['basin vpc rename v7q2m4n8p1 private-eu'],
      check: checkOutput,
      async run(c) {
        const renamed = await c.api.POST(`${one}/rename`, {
          ...vpcPath(c),
          body: { name: c.args[1] as string },
        });
        printVpc(c, renamed);
      },
    }),
    apiCommand({
      name: 'delete',
      args: ['vpc_id'],
      usage: [['delete <vpc_id>', 'delete a VPC (no service may be attached)']],
      details: 'Deletes a VPC and its peerings; a VPC with services attached is refused.',
      examples: ['basin vpc delete v7q2m4n8p1'],
      check: checkOutput,
      async run(c) {
        const id = c.args[0] as string;
        await c.api.DELETE(one, vpcPath(c));
        if (wantsJson(c)) c.print({ id, deleted: true });
        else c.out(`Deleted ${id}.\n`);
      },
    }),
    membershipCommand('attach'),
    membershipCommand('detach'),
    apiCommand({
      name: 'peering create',
      args: ['vpc_id'],
      options: {
        'peer-vpc-id': { value: 'id', help: 'the VPC to peer with' },
        'peer-account-id': { value: 'id', help: "the peer VPC's account (project)" },
        'peer-region': { value: 'region_code', help: "the peer VPC's region" },
        ...WAIT_OPTION('it is active (pending until then)'),
      },
      usage: [
        [
          'peering create <vpc_id> --peer-vpc-id <id> --peer-account-id <id> --peer-region <region_code> [--wait]',
          'peer a VPC with another',
        ],
      ],
      details: [
        "Peers a VPC with another: its services admit the peer network's blocks once the",
        'peering is active (pending until the network has it; failed says why).',
      ].join('\n'),
      examples: [
        'basin vpc peering create v7q2m4n8p1 --peer-vpc-id v9x8w7 --peer-account-id p1q2r3 --peer-region us-east-1',
      ],
      check: (opt) =>
        checkOutput(opt) ??
        (['peer-vpc-id', 'peer-account-id', 'peer-region'].some((o) => opt(o) === undefined)
          ? 'Give --peer-vpc-id <id>, --peer-account-id <id> and --peer-region <region_code>.'
          : undefined),
      async run(c) {
        const peering = await c.api.POST(peerings, {
          ...vpcPath(c),
          body: {
            peer_vpc_id: c.opt('peer-vpc-id') as string,
            peer_account_id: c.opt('peer-account-id') as string,
            peer_region_code: c.opt('peer-region') as string,
          },
        });
        printPeering(
          c,
          c.flag('wait') ? await settledPeering(c, c.args[0] as string, peering) : peering,
        );
      },
    }),
    apiCommand({
      name: 'peering list',
      args: ['vpc_id'],
      usage: [['peering list <vpc_id>', 'list the peerings of a VPC']],
      details: 'Lists the peerings of a VPC: id, status, peer VPC, account and region.',
      examples: ['basin vpc peering list v7q2m4n8p1'],
      check: checkOutput,
      async run(c) {
        const list = await c.api.GET(peerings, vpcPath(c));
        if (wantsJson(c)) c.print(list);
        else
          c.out(
            table(
              ['ID', 'STATUS', 'PEER VPC', 'PEER ACCOUNT', 'PEER REGION'],
              list.map((p) => [
                p.id ?? '-',
                p.status ?? '-',
                p.peer_vpc_id ?? '-',
                p.peer_account_id ?? '-',
                p.peer_region_code ?? '-',
              ]),
            ),
          );
      },
    }),
    apiCommand({
      name: 'peering get',
      args: ['vpc_id', 'peering_id'],
      usage: [['peering get <vpc_id> <peering_id>', 'show a peering']],
      details: 'Shows a peering of a VPC: its status, and the peer VPC, account and region.',
      examples: ['basin vpc peering get v7q2m4n8p1 pr1s2t3u4'],
      check: checkOutput,
      async run(c) {
        printPeering(c, await c.api.GET(`${peerings}/{peering_id}`, peeringPath(c)));
      },
    }),
    apiCommand({
      name: 'peering delete',
      args: ['vpc_id', 'peering_id'],
      usage: [['peering delete <vpc_id> <peering_id>', 'delete a peering']],
      details: "Deletes a peering: neither VPC's services are reached from the other's any more.",
      examples: ['basin vpc peering delete v7q2m4n8p1 pr1s2t3u4'],
      check: checkOutput,
      async run(c) {
        const id = c.args[1] as string;
        await c.api.DELETE(`${peerings}/{peering_id}`, peeringPath(c));
        if (wantsJson(c)) c.print({ id, deleted: true });
        else c.out(`Deleted ${id}.\n`);
      },
    }),
  ],
};
