// `basin project …`: projects are what credentials see and services live in.

import { listAllProjects } from '../commands/admin-lists.js';
import { createProject } from '../commands/admin.js';
import type { Project } from '../domain/types.js';
import type { CliGroup } from './command.js';
import { table } from './table.js';

const shown = (p: Project) => ({ id: p.id, name: p.name, created_at: p.createdAt });

export const projectGroup: CliGroup = {
  name: 'project',
  summary: 'Projects: every service, VPC and credential belongs to one.',
  commands: [
    {
      name: 'create',
      args: ['name'],
      options: {},
      usage: [['create <name>', 'create a project; prints its id']],
      details: [
        'Creates a project and prints its id (with --json, the project as JSON).',
        '',
        'The server creates a "default" project and a first credential only when it',
        'starts on a data directory with no project at all; once a project exists,',
        'that bootstrap no longer happens, so issue credentials with',
        '`basin credential create`.',
      ].join('\n'),
      examples: [
        'basin project create analytics',
        'P=$(basin project create analytics)     # keep the id for the next commands',
      ],
      async run(c) {
        const project = await createProject(c.store, c.clock, c.args[0] as string);
        if (c.json) c.print(shown(project));
        else c.out(`${project.id}\n`);
      },
    },
    {
      name: 'list',
      args: [],
      options: {},
      usage: [['list', 'list projects']],
      details: 'Lists every project: id, name and creation time.',
      examples: ['basin project list', "basin --json project list | jq -r '.[].id'"],
      async run(c) {
        const projects = await listAllProjects(c.store);
        if (c.json) c.print(projects.map(shown));
        else
          c.out(
            table(
              ['ID', 'NAME', 'CREATED'],
              projects.map((p) => [p.id, p.name, p.createdAt]),
            ),
          );
      },
    },
  ],
};
