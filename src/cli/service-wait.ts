// `--wait` for the `basin service` commands: poll with the client's waitFor
// (backoff, a deadline, UNSTABLE ends it) while a status line shows where
// the service is (status-line.ts).

import type { Service, ServiceStatus } from '../client/index.js';
import type { ApiContext, CliOption } from './command.js';
import { statusLine } from './status-line.js';

export const WAIT_OPTION = (what: string): Record<string, CliOption> => ({
  wait: { help: `wait until ${what}, showing the status as it changes` },
});

/** Waits for `target` when --wait was given; returns the service as last seen. */
export async function waitIfAsked(
  c: ApiContext,
  service: Service,
  target: ServiceStatus,
): Promise<Service> {
  if (!c.flag('wait')) return service;
  const line = statusLine(c.io.statusTerminal, c.clock, service.service_id ?? 'service', target);
  try {
    const done = await c.api.waitFor(service, target, { onStatus: (s) => line.update(s) });
    line.done();
    return done;
  } catch (err) {
    line.done(err instanceof Error ? err.message : String(err));
    throw err;
  }
}
