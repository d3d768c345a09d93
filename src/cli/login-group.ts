// `basin login`: remember which Basin `basin service` talks to, with which
// key and in which project. The key is checked first (GET /v1/auth/info),
// so a typo is refused here, not at the next command.

import { resolve } from 'node:path';
import { type AuthInfo, BasinError, type BasinClient, createBasinClient } from '../client/index.js';
import { type BaseContext, CliFailure, type CliGroup, UsageError } from './command.js';
import { type Login, writeLogin } from './login-file.js';

export const loginGroup: CliGroup = {
  name: 'login',
  summary: 'Remember the Basin that `basin service` commands drive, and the key to use.',
  standalone: true,
  commands: [
    {
      kind: 'plain',
      name: 'login',
      args: [],
      options: {
        url: { value: 'url', help: "Basin's address, e.g. http://127.0.0.1:8080 (env BASIN_URL)" },
        key: {
          value: 'key',
          help: 'a bearer key (env BASIN_API_KEY, or piped on standard input;\nseen by other users of this machine when given here)',
        },
        project: {
          value: 'project_id',
          help: "the project to work in (default: the key's, if it sees one)",
        },
        ca: {
          value: 'file',
          help: "the installation's CA certificate, for `basin service psql`",
        },
      },
      usage: [
        [
          'login --url <url> [--key <key>] [--project <project_id>] [--ca <file>]',
          'check a key and save it for `basin service`',
        ],
      ],
      details: [
        'Checks the key against the Basin at --url and saves the address, the key',
        'and the project in $XDG_CONFIG_HOME/basin/config.json (else',
        '~/.config/basin/config.json), readable by you alone (0600). The key comes',
        'from --key, BASIN_API_KEY, or standard input. BASIN_URL and BASIN_API_KEY',
        'set together also stand in for the file, without a login.',
      ].join('\n'),
      examples: [
        'basin login --url http://127.0.0.1:8080 --key "$KEY"',
        'echo "$KEY" | basin login --url https://basin.example.com --project l8zcgyp9po',
      ],
      async run(c) {
        const url = c.opt('url') ?? c.env.BASIN_URL;
        const usage = (message: string) =>
          new UsageError(message, { group: loginGroup, command: loginGroup.commands[0] });
        if (!url) throw usage('Give the address of Basin: --url <url>.');
        if (!/^https?:\/\//.test(url))
          throw usage(`--url must start with http:// or https://; got ${url}.`);
        const apiKey = c.opt('key') ?? c.env.BASIN_API_KEY ?? (await c.io.readStdin?.())?.trim();
        if (!apiKey) throw usage('Give a key: --key <key>, BASIN_API_KEY, or on standard input.');
        const api = createBasinClient({ url, apiKey });
        const info = await api.GET('/v1/auth/info');
        const projectId = c.opt('project') ?? (await projectOf(api, info));
        if (c.opt('project') !== undefined) await checkProject(api, projectId);
        const ca = c.opt('ca');
        const login: Login = {
          url: api.url,
          apiKey,
          projectId,
          ...(ca ? { ca: resolve(ca) } : {}),
        };
        const file = writeLogin(c.env, login);
        const who =
          info.type === 'apiKey'
            ? `credential ${info.api_key?.name} (${info.api_key?.public_key})`
            : `user ${info.oauth?.user.name} <${info.oauth?.user.email}>`;
        report(c, { url: api.url, project_id: projectId, config_file: file, auth: info }, [
          `Logged in to ${api.url} as ${who}, project ${projectId}.`,
          `Saved in ${file}.`,
        ]);
      },
    },
  ],
};

/**
 * The project a key works in: a project credential's own; for a user token,
 * its only project. A token that sees several must be told (--project).
 */
export async function projectOf(api: BasinClient, known?: AuthInfo): Promise<string> {
  const info = known ?? (await api.GET('/v1/auth/info'));
  if (info.type === 'apiKey' && info.api_key) return info.api_key.project.id;
  const projects = await api.GET('/v1/projects');
  if (projects.length === 1) return (projects[0] as { id: string }).id;
  throw new CliFailure(
    projects.length === 0
      ? 'The key sees no project: ask the administrator to add its user to one.'
      : `The key sees ${projects.length} projects (${projects.map((p) => p.id).join(', ')}): choose one with --project <project_id>.`,
  );
}

async function checkProject(api: BasinClient, projectId: string): Promise<void> {
  const projects = await api.GET('/v1/projects');
  if (!projects.some((p) => p.id === projectId)) {
    throw new BasinError(
      'NOT_FOUND',
      `The key does not see project ${projectId}; it sees ${projects.map((p) => p.id).join(', ') || 'none'}.`,
    );
  }
}

function report(c: BaseContext, json: unknown, lines: string[]): void {
  if (c.json) c.print(json);
  else c.out(lines.map((l) => `${l}\n`).join(''));
}
