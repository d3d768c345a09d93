// The repository host's side of the hosts driver (drivers/hosts/): the
// control plane asks for a service's repository (made, its server running),
// a step of a backup, an expiry or a removal. Errors travel as the driver
// calls' do (driver-rpc.ts): retryable unless they say otherwise.

import type { IncomingMessage } from 'node:http';
import { readBody } from '../driver-rpc.js';
import type { BackupSource, RepositoryHost } from './repository-host.js';

export type RepositoryCall =
  | { action: 'ensure'; serviceId: string; port: number }
  | {
      action: 'backup';
      serviceId: string;
      port: number;
      since: number;
      /** Its checkpoint immediate (a first backup's always is). */
      fast?: boolean;
      source: BackupSource;
      processMax: number;
    }
  | { action: 'expire'; serviceId: string; oldestKept: string }
  | { action: 'remove'; serviceId: string };

export async function answerRepositoryCall(
  host: RepositoryHost,
  req: IncomingMessage,
): Promise<{ status: number; body: unknown }> {
  let call: RepositoryCall;
  try {
    call = JSON.parse(await readBody(req)) as RepositoryCall;
  } catch {
    return { status: 400, body: { code: 'INVALID_REQUEST', message: 'The body is not JSON.' } };
  }
  if (typeof call?.serviceId !== 'string' || !/^[a-z0-9]{1,32}$/.test(call.serviceId)) {
    return { status: 400, body: { code: 'INVALID_REQUEST', message: 'serviceId is missing.' } };
  }
  try {
    switch (call.action) {
      case 'ensure':
        return ok(await host.ensure(call.serviceId, port(call.port)));
      case 'backup':
        return ok(
          await host.backup(
            call.serviceId,
            port(call.port),
            Number(call.since),
            call.source,
            Math.max(1, Math.min(4, Number(call.processMax) || 1)),
            call.fast === true,
          ),
        );
      case 'expire':
        await host.expire(call.serviceId, String(call.oldestKept));
        return ok(null);
      case 'remove':
        return ok(await host.remove(call.serviceId));
      default:
        return { status: 400, body: { code: 'INVALID_REQUEST', message: 'Unknown action.' } };
    }
  } catch (err) {
    return { status: 200, body: { error: { message: (err as Error).message, retryable: true } } };
  }
}

const ok = (result: unknown) => ({ status: 200, body: { result } });

function port(p: unknown): number {
  if (!Number.isInteger(p) || (p as number) < 1 || (p as number) > 55_535) {
    throw new Error(`not a service port: ${String(p)}`);
  }
  return p as number;
}
