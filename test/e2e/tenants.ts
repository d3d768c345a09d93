// Tenants for the attack tests: what a hostile customer of a running Basin
// holds, and nothing more. A tenant has a project and a credential that sees
// only it (made with the shipped CLI, as an operator would), acts through the
// HTTP API with that credential, and, inside each of its services, is the
// service's `tsdbadmin`: CREATEROLE lets it grant itself
// pg_execute_server_program and so run any program as the service's OS user
// through COPY … PROGRAM (docs/security.md). Nothing here reaches into
// Basin's store or runs anything as a service's user except through its
// server, so what a test shows is what a tenant can do.

import assert from 'node:assert/strict';
import type pg from 'pg';
import type { BasinProcess, HttpResult } from '../harness/basin-api.js';
import type { Installation } from './basin-process.js';
import { pgClient } from './clients.js';

/** A project and the credential of one tenant. */
export interface Tenant {
  readonly projectId: string;
  /** The Authorization header of its project credential (Bearer). */
  readonly authorization: string;
}

/** A service as its create answered it (the only time its password is shown). */
export interface CreatedService {
  service_id: string;
  initial_password: string;
  endpoint: { host: string; port: number };
}

/** The project Basin bootstrapped, with the bootstrap credential. */
export function bootstrapTenant(b: BasinProcess): Tenant {
  return { projectId: b.projectId, authorization: `Bearer ${b.bearerKey}` };
}

/**
 * A new project and a project credential for it, made with the shipped CLI
 * (`basin project create`, `basin credential create --project`) on the
 * installation's data directory, while Basin runs.
 */
export async function newTenant(inst: Installation, name: string): Promise<Tenant> {
  const project = await inst.cli('--json', 'project', 'create', name);
  assert.equal(project.code, 0, project.stderr);
  const projectId = JSON.parse(project.stdout).id as string;
  const cred = await inst.cli('--json', 'credential', 'create', '--project', projectId);
  assert.equal(cred.code, 0, cred.stderr);
  return { projectId, authorization: `Bearer ${JSON.parse(cred.stdout).bearer_key}` };
}

/** What `tenant` does through the API of `b`, with its own credential only. */
export class TenantApi {
  constructor(
    readonly b: BasinProcess,
    readonly tenant: Tenant,
  ) {}

  /** `/projects/<its project>/services[/<id>]` */
  path(id?: string): string {
    return `/projects/${this.tenant.projectId}/services${id === undefined ? '' : `/${id}`}`;
  }

  call(method: string, path: string, body?: unknown): Promise<HttpResult> {
    return this.b.request(method, path, {
      authorization: this.tenant.authorization,
      ...(body === undefined ? {} : { body }),
    });
  }

  /**
   * Creates a POSTGRES service, `shared` unless a size is given (the
   * quickest to make); answers as the create did.
   */
  async create(
    name: string,
    size: { cpu_millis: string; memory_gbs: string } = {
      cpu_millis: 'shared',
      memory_gbs: 'shared',
    },
  ): Promise<CreatedService> {
    const res = await this.call('POST', this.path(), { name, addons: [], ...size });
    assert.equal(res.status, 202, res.text);
    assert.equal(res.body.status, 'QUEUED');
    return res.body as CreatedService;
  }

  /** Polls GET of its service until `status`; returns that body. */
  async waitForStatus(id: string, status: string, timeoutMs = 120_000): Promise<any> {
    let seen = 'nothing';
    return this.b.waitFor(
      async () => {
        const res = await this.call('GET', this.path(id));
        seen = `${res.status} ${res.body?.status ?? res.text}`;
        return res.status === 200 && res.body.status === status ? res.body : undefined;
      },
      () => `service ${id} to be ${status} (last seen: ${seen})`,
      timeoutMs,
    );
  }

  /** Deletes its service and waits until GET answers 404. */
  async deleteAndWait(id: string, timeoutMs = 120_000): Promise<void> {
    const res = await this.call('DELETE', this.path(id));
    assert.equal(res.status, 202, res.text);
    await this.b.waitFor(
      async () => (await this.call('GET', this.path(id))).status === 404,
      `service ${id} to be gone`,
      timeoutMs,
    );
  }
}

/**
 * A tenant inside one of its services: a `tsdbadmin` session over TLS that
 * has granted itself pg_execute_server_program, so that it runs programs as
 * the service's OS user, where and as that user's server runs them (its
 * namespaces, no_new_privs and all).
 */
export interface TenantShell {
  readonly client: pg.Client;
  /** The output lines of `program`, through COPY … FROM PROGRAM (stdout only). */
  run(program: string): Promise<string[]>;
  /** Runs `program` through COPY … TO PROGRAM (its output is discarded; a failure throws). */
  feed(program: string): Promise<void>;
  /**
   * Runs `command` and asserts that it failed, and that its error output
   * matches `why` (the OS said no, rather than the command being wrong).
   * Returns what it said.
   */
  refused(command: string, why?: RegExp): Promise<string>;
  end(): Promise<void>;
}

/** The OS refusing: permissions, or (in a private mount namespace, hidepid /proc) nothing to see. */
export const REFUSED = /Permission denied|Operation not permitted/;
export const REFUSED_OR_HIDDEN =
  /Permission denied|Operation not permitted|No such file or directory/;

export async function tenantShell(svc: CreatedService, password: string): Promise<TenantShell> {
  const client = await pgClient(svc.endpoint.port, password);
  await client.query('GRANT pg_execute_server_program TO tsdbadmin');
  await client.query('CREATE TEMP TABLE program_out (line text)');
  const run = async (program: string): Promise<string[]> => {
    await client.query('TRUNCATE program_out');
    // A delimiter no output has: every line is one value, tabs and all.
    await client.query(
      `COPY program_out FROM PROGRAM ${client.escapeLiteral(program)} WITH (DELIMITER E'\\x01')`,
    );
    const { rows } = await client.query<{ line: string }>('SELECT line FROM program_out');
    return rows.map((r) => r.line);
  };
  return {
    client,
    run,
    async feed(program) {
      // The row COPY writes to the program's stdin must find a reader: a
      // program that reads none and ends first would fail the COPY with a
      // broken pipe. The shell reads it once the program is done, and
      // exits with the program's status.
      const reading = `(${program}); s=$?; cat >/dev/null; exit $s`;
      await client.query(`COPY (SELECT 1) TO PROGRAM ${client.escapeLiteral(reading)}`);
    },
    async refused(command, why = REFUSED) {
      // The program itself succeeds, so that what the command said comes back.
      const out = await run(`(${command}) 2>&1; echo "exit=$?"`);
      const said = out.join('\n');
      assert.notEqual(out.at(-1), 'exit=0', `${command} succeeded: ${said}`);
      assert.match(said, why, `${command}: ${said}`);
      return said;
    },
    end: () => client.end().catch(() => {}),
  };
}
