// `basin user …`: people (or programs) whose tokens see several projects.

import { listUsers } from '../commands/admin-lists.js';
import { addUserToProject, createUser, setUserEmail } from '../commands/admin.js';
import type { CliGroup } from './command.js';
import { table } from './table.js';

export const userGroup: CliGroup = {
  name: 'user',
  summary: [
    'Users: a user token (`basin credential create --user`) sees every project',
    'its user belongs to, including projects added later.',
  ].join('\n'),
  commands: [
    {
      name: 'create',
      args: ['name'],
      options: { email: { value: 'address', help: "the user's email address" } },
      usage: [['create <name> [--email <address>]', 'create a user; prints its id']],
      details: [
        'Creates a user (names are unique) and prints its id.',
        'A user sees nothing until added to projects with `basin user add`; it',
        'authenticates with a user token from `basin credential create --user`.',
        'Its email is what GET /v1/auth/info shows for its tokens (without one,',
        '<user id>@users.basin.localhost, until `basin user set-email`).',
      ].join('\n'),
      examples: [
        'basin user create alice --email alice@example.com',
        'U=$(basin user create alice)',
      ],
      async run(c) {
        const user = await createUser(c.store, c.clock, c.args[0] as string, c.opt('email'));
        if (c.json)
          c.print({ id: user.id, name: user.name, email: user.email, created_at: user.createdAt });
        else c.out(`${user.id}\n`);
      },
    },
    {
      name: 'set-email',
      args: ['user_id', 'address'],
      options: {},
      usage: [['set-email <user_id> <address>', "set a user's email address"]],
      details: "Sets the email address GET /v1/auth/info shows for the user's tokens.",
      examples: ['basin user set-email 4hx0m2p9qa alice@example.com'],
      async run(c) {
        const [userId, email] = c.args as [string, string];
        await setUserEmail(c.store, userId, email);
        if (c.json) c.print({ id: userId, email });
        else c.out(`User ${userId} now has the address ${email}.\n`);
      },
    },
    {
      name: 'add',
      args: ['user_id'],
      options: { project: { value: 'project_id', help: 'the project to add the user to' } },
      usage: [['add <user_id> --project <project_id>', 'add a user to a project']],
      details: [
        "Adds the user to the project. The user's tokens see the project at once,",
        'also on a running server. Adding a user twice is harmless.',
      ].join('\n'),
      examples: ['basin user add 4hx0m2p9qa --project l8zcgyp9po'],
      check: (opt) =>
        opt('project') === undefined ? 'Give the project: --project <project_id>.' : undefined,
      async run(c) {
        const userId = c.args[0] as string;
        const projectId = c.opt('project') as string;
        await addUserToProject(c.store, userId, projectId);
        if (c.json) c.print({ user_id: userId, project_id: projectId });
        else c.out(`Added user ${userId} to project ${projectId}.\n`);
      },
    },
    {
      name: 'list',
      args: [],
      options: {},
      usage: [['list', 'list users and their projects']],
      details: 'Lists every user: id, name, email, creation time and the projects it belongs to.',
      examples: ['basin user list', 'basin --json user list'],
      async run(c) {
        const users = await listUsers(c.store);
        if (c.json)
          c.print(
            users.map((u) => ({
              id: u.id,
              name: u.name,
              email: u.email,
              created_at: u.createdAt,
              project_ids: u.projectIds,
            })),
          );
        else
          c.out(
            table(
              ['ID', 'NAME', 'EMAIL', 'CREATED', 'PROJECTS'],
              users.map((u) => [
                u.id,
                u.name,
                u.email ?? '-',
                u.createdAt,
                u.projectIds.join(',') || '-',
              ]),
            ),
          );
      },
    },
  ],
};
