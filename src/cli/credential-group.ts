// `basin credential …`: API credentials. A credential's secrets are printed
// once, by `create`, on standard output only; Basin keeps their hashes.

import {
  type CredentialListing,
  listCredentials,
  projectIdsOfUser,
} from '../commands/admin-lists.js';
import { issueCredential, revokeCredential } from '../commands/admin.js';
import type { CliGroup } from './command.js';
import { table } from './table.js';

const DEFAULT_NAME = 'cli';

/** The listing's JSON shape: snake_case, no hashes (the command drops them). */
const shown = (k: CredentialListing) => ({
  id: k.id,
  kind: k.kind,
  project_id: k.projectId,
  user_id: k.userId,
  name: k.name,
  access_key: k.accessKey,
  created_at: k.createdAt,
  revoked_at: k.revokedAt,
});

export const credentialGroup: CliGroup = {
  name: 'credential',
  summary: [
    'API credentials: each is a bearer key and an access key / secret key pair',
    '(HTTP Basic), for one project or for a user. Secrets are shown once.',
  ].join('\n'),
  commands: [
    {
      name: 'create',
      args: [],
      options: {
        project: { value: 'project_id', help: 'a project credential: sees that project only' },
        user: { value: 'user_id', help: 'a user token: sees every project the user belongs to' },
        name: { value: 'name', help: `a label for listings (default "${DEFAULT_NAME}")` },
      },
      usage: [
        [
          'create --project <project_id> [--name <name>]',
          'issue a project credential: sees the project (shown once)',
        ],
        [
          'create --user <user_id> [--name <name>]',
          "issue a user token: sees all the user's projects (shown once)",
        ],
      ],
      details: [
        'Issues an API credential and prints, once, its id, a bearer key and an',
        'access key / secret key pair. Basin stores only hashes of the secrets:',
        'they cannot be shown again; a lost secret means a new credential.',
        '',
        'Use either as `Authorization: Bearer <bearer key>` or as HTTP Basic',
        'authentication with <access key>:<secret key>.',
      ].join('\n'),
      examples: [
        'basin credential create --project l8zcgyp9po --name ci',
        'basin credential create --user 4hx0m2p9qa --name laptop',
        'KEY=$(basin --json credential create --project l8zcgyp9po | jq -r .bearer_key)',
      ],
      check(opt) {
        const project = opt('project') !== undefined;
        const user = opt('user') !== undefined;
        if (project && user) return 'Give either --project or --user, not both.';
        if (!project && !user)
          return 'Say whom the credential is for: --project <project_id> or --user <user_id>.';
        return undefined;
      },
      async run(c) {
        const projectId = c.opt('project');
        const userId = c.opt('user');
        const name = c.opt('name') ?? DEFAULT_NAME;
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
        if (userId !== undefined && (await projectIdsOfUser(c.store, userId)).length === 0) {
          c.note(
            `basin: note: user ${userId} belongs to no project yet; add it with \`basin user add ${userId} --project <project_id>\`.\n`,
          );
        }
      },
    },
    {
      name: 'list',
      args: [],
      options: {},
      usage: [['list', 'list credentials (never their secrets)']],
      details: [
        'Lists every credential: id, kind, owner (project or user id), name, access',
        'key (the public half of the Basic pair), creation and revocation times.',
        'Secrets are never shown: Basin does not have them.',
      ].join('\n'),
      examples: ['basin credential list', 'basin --json credential list'],
      async run(c) {
        const creds = (await listCredentials(c.store)).map(shown);
        if (c.json) c.print(creds);
        else
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
      },
    },
    {
      name: 'revoke',
      args: ['credential_id'],
      options: {},
      usage: [['revoke <credential_id>', 'revoke a credential at once']],
      details: [
        'Revokes the credential: both its bearer key and its access/secret pair stop',
        'working at once, also on a running server. Revocation cannot be undone.',
      ].join('\n'),
      examples: ['basin credential revoke k3j9x0a1bc'],
      async run(c) {
        const id = c.args[0] as string;
        await revokeCredential(c.store, c.clock, id);
        if (c.json) c.print({ id, revoked: true });
        else c.out(`Revoked credential ${id}.\n`);
      },
    },
  ],
};
