// `basin service psql <id>`: runs psql on the service's endpoint as
// tsdbadmin@tsdb with sslmode=verify-full when the CLI has the installation's
// CA certificate: --ca, else the one `basin login --ca` saved, else the one
// the local driver keeps in the data directory (<data dir>/local/ca/ca.crt,
// found as the admin commands find the data directory), when this machine
// runs that Basin. Without a CA it connects with sslmode=require and says
// that the server is not verified. Always with channel_binding=require: the
// password then goes to no server that does not hold the key of the
// certificate the client saw (SCRAM-SHA-256-PLUS; a server asking for a
// cleartext password is refused). The password: PGPASSWORD, or psql asks.

import { accessSync, constants } from 'node:fs';
import { resolve, sep } from 'node:path';
import { localCaCertificate, OPTIONS, parseStoreConfig } from '../config.js';
import { type ApiCommand, type ApiContext, CliFailure } from './command.js';
import { PROJECT_OPTION } from './service-format.js';
import { DATA_DIR } from './global-options.js';

/** Where the local driver keeps the installation's CA, under the data directory (its layout says). */
export const LOCAL_CA = localCaCertificate('.').split(sep);

export const servicePsqlCommand: ApiCommand = {
  kind: 'api',
  name: 'psql',
  args: ['service_id'],
  rest: 'psql arguments',
  options: {
    ...PROJECT_OPTION,
    ca: {
      value: 'file',
      help: "the installation's CA certificate (default: the login's, else <data dir>/local/ca/ca.crt)",
    },
  },
  usage: [
    [
      'psql <service_id> [--ca <file>] [-- <psql arguments>]',
      'connect to a service with psql, verifying its certificate',
    ],
  ],
  details: [
    'Runs psql as tsdbadmin on database tsdb of the service, with',
    'sslmode=verify-full and the installation CA (--ca, the one `basin login --ca`',
    'saved, or <data dir>/local/ca/ca.crt when this machine runs the Basin), and',
    "channel_binding=require (no server without the certificate's key gets the password).",
    'Arguments after -- go to psql. The password: PGPASSWORD, else psql asks.',
    "Exits with psql's status.",
  ].join('\n'),
  examples: [
    'basin service psql d1k5vk7hf2',
    'PGPASSWORD=… basin service psql d1k5vk7hf2 -- -c "SELECT version()"',
  ],
  async run(c) {
    const id = c.args[0] as string;
    const svc = await c.api.GET('/v1/projects/{project_id}/services/{service_id}', {
      params: { path: { project_id: c.projectId, service_id: id } },
    });
    if (!svc.endpoint) throw new CliFailure(`Service ${id} has no endpoint yet.`);
    if (svc.status !== 'READY')
      c.note(`basin: service ${id} is ${svc.status}; psql may not connect.\n`);
    const ca = caCertificate(c);
    if (ca === undefined) {
      c.note(
        `basin: no CA certificate for ${c.login.url}: connecting with sslmode=require, which does not verify the server. Give --ca <file> (the installation's <data dir>/${LOCAL_CA.join('/')}).\n`,
      );
    }
    const conninfo = connectionString({ ...svc.endpoint, ca });
    if (!c.io.exec) throw new CliFailure('This basin cannot run programs.');
    c.exit(await c.io.exec('psql', [conninfo, ...c.rest], c.env));
  },
};

/** A libpq connection string for tsdbadmin@tsdb, on the service's endpoint (not its pooler: PgBouncer 1.18 has no channel binding). */
export function connectionString(o: { host: string; port: number; ca: string | undefined }) {
  const words: [string, string][] = [
    ['host', o.host],
    ['port', String(o.port)],
    ['user', 'tsdbadmin'],
    ['dbname', 'tsdb'],
    ['sslmode', o.ca === undefined ? 'require' : 'verify-full'],
    ...(o.ca === undefined ? [] : [['sslrootcert', o.ca] as [string, string]]),
    ['channel_binding', 'require'],
  ];
  return words.map(([k, v]) => `${k}=${quote(v)}`).join(' ');
}

/** libpq's quoting: single quotes around values with spaces or quotes, \ escapes. */
function quote(v: string): string {
  return /^[^\s'\\]+$/.test(v) ? v : `'${v.replace(/[\\']/g, (m) => `\\${m}`)}'`;
}

export function caCertificate(c: ApiContext): string | undefined {
  const given = c.opt('ca') ?? c.login.ca;
  if (given !== undefined) {
    const file = resolve(given);
    if (!readable(file)) throw new CliFailure(`Cannot read the CA certificate ${file}.`);
    return file;
  }
  const dataDir = c.opt(DATA_DIR);
  const { dataDir: dir } = parseStoreConfig(
    dataDir === undefined ? [] : [OPTIONS.dataDir.flag, dataDir],
    c.env,
  );
  const local = localCaCertificate(dir);
  return readable(local) ? local : undefined;
}

function readable(file: string): boolean {
  try {
    accessSync(file, constants.R_OK);
    return true;
  } catch {
    return false;
  }
}
