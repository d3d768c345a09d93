// The host side of the hosts driver (src/drivers/hosts/): the control plane
// calls a method of the local driver that runs on this host, by name, with
// JSON arguments, and gets its JSON result, or the DriverError it threw
// (whether it may be retried travels with it). Only the methods below: the
// driver's start and close are the agent's, and its watches are read by
// polling (metrics) for now.

import type { IncomingMessage } from 'node:http';
import { type Driver, DriverError } from '../drivers/driver.js';

/** What the control plane may call, and how many arguments each takes. */
export const DRIVER_METHODS = {
  applyService: 1,
  deleteService: 1,
  inspectService: 1,
  observeService: 1,
  backupService: 2,
  expireBackups: 2,
  openBackupSource: 1,
  closeBackupSource: 1,
  readyForkParent: 2,
  forkMade: 1,
  readLogs: 2,
  metrics: 1,
  sampleSeries: 1,
  applyPatroniNode: 2,
  applyPatroniEndpoint: 2,
  inspectPatroniNode: 2,
  openPatroniSource: 2,
  closePatroniSource: 2,
  readyPatroniParent: 3,
  stalePatroniSettings: 2,
  restartPatroniNode: 2,
  switchoverPatroni: 3,
  stopPatroniNode: 2,
  admitReplicaSet: 2,
  releaseReplicaSet: 2,
  applyReplicaNode: 2,
  inspectReplicaNode: 2,
  applyReplicaSetEndpoint: 2,
} as const;
export type DriverMethod = keyof typeof DRIVER_METHODS;

export interface DriverCall {
  method: DriverMethod;
  args: unknown[];
}

export type DriverAnswer = { result: unknown } | { error: { message: string; retryable: boolean } };

/** Runs one call on `driver`; a call that is not one of DRIVER_METHODS is a 400. */
export async function answerDriverCall(
  driver: Driver,
  req: IncomingMessage,
  onService?: (serviceId: string) => void,
): Promise<{ status: number; body: DriverAnswer | { code: string; message: string } }> {
  let call: DriverCall;
  try {
    call = JSON.parse(await readBody(req)) as DriverCall;
  } catch {
    return { status: 400, body: { code: 'INVALID_REQUEST', message: 'The body is not JSON.' } };
  }
  const arity = DRIVER_METHODS[call?.method as DriverMethod];
  const fn = (driver as unknown as Record<string, unknown>)[call?.method];
  if (
    arity === undefined ||
    typeof fn !== 'function' ||
    !Array.isArray(call.args) ||
    call.args.length !== arity
  ) {
    return {
      status: 400,
      body: { code: 'INVALID_REQUEST', message: `Not a driver call: ${String(call?.method)}.` },
    };
  }
  const about = serviceOf(call.args[0]);
  if (about !== undefined) onService?.(about);
  try {
    const args = revive(call.method, call.args);
    const result = await (fn as (...a: unknown[]) => unknown).apply(driver, args);
    return { status: 200, body: { result: result ?? null } };
  } catch (err) {
    const retryable = err instanceof DriverError ? err.retryable : true;
    return { status: 200, body: { error: { message: (err as Error).message, retryable } } };
  }
}

/**
 * The arguments as the driver takes them from what JSON carried: a log
 * query's times are Dates again (JSON made them strings); its abort signal
 * stays with the control plane's request.
 */
function revive(method: DriverMethod, args: unknown[]): unknown[] {
  if (method !== 'readLogs') return args;
  const query = args[1] as Record<string, unknown> | null;
  if (typeof query !== 'object' || query === null) return args;
  const date = (v: unknown) => (typeof v === 'string' ? new Date(v) : undefined);
  return [
    args[0],
    { ...query, since: date(query.since), until: date(query.until), signal: undefined },
  ];
}

/** The service a call is about: its id, a spec's, or a target's. */
function serviceOf(arg: unknown): string | undefined {
  if (typeof arg === 'string') return arg;
  const o = arg as { serviceId?: unknown; id?: unknown } | null;
  const id = typeof o?.serviceId === 'string' ? o.serviceId : o?.id;
  return typeof id === 'string' ? id : undefined;
}

const LIMIT = 1 << 20;

export function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let size = 0;
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > LIMIT) req.destroy(new Error('body too large'));
      else chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}
