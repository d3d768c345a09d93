// waitFor: poll a service until it reaches a status. Polls back off (quick
// at first, for the short states of a sim or a local create, then gently)
// and stop at a deadline. Rate limits, a Basin restarting and a network
// blip are waited out, since the wait is long anyway; any other error ends it.

import type { Gets } from './data-method.js';
import { BasinError, isTransient } from './errors.js';
import type { components } from './generated/openapi.js';
import { type ServiceRef, servicePath } from './logs.js';

type Service = components['schemas']['Service'];
/** A service status, or DELETED: gone (GET answers 404). */
export type ServiceStatus = NonNullable<Service['status']>;

export interface WaitOptions {
  /** Give up after this long (default 10 minutes): WAIT_TIMEOUT. */
  timeoutMs?: number;
  /** The first pause between polls (default 200 ms); each next one is 1.5 times longer… */
  intervalMs?: number;
  /** …up to this (default 5 s). */
  maxIntervalMs?: number;
  /**
   * Statuses that end the wait with WAIT_FAILED (default UNSTABLE, unless it
   * is the status waited for): Basin marks a service UNSTABLE when its work
   * failed, and it stays so until a request tries again.
   */
  failOn?: readonly ServiceStatus[];
  /** Called with each status seen as it changes (a progress line). */
  onStatus?: (status: ServiceStatus, service: Service | undefined) => void;
  signal?: AbortSignal;
}

export async function waitFor(
  client: Gets,
  service: ServiceRef,
  status: ServiceStatus,
  options: WaitOptions = {},
): Promise<Service> {
  const {
    timeoutMs = 600_000,
    intervalMs = 200,
    maxIntervalMs = 5_000,
    onStatus,
    signal,
  } = options;
  const failOn = options.failOn ?? (status === 'UNSTABLE' ? [] : ['UNSTABLE']);
  const path = servicePath(service);
  const deadline = Date.now() + timeoutMs;
  let pause = intervalMs;
  let last: ServiceStatus | undefined;
  let lastBody: Service | undefined;
  for (;;) {
    signal?.throwIfAborted();
    let current: Service | undefined;
    let seen: ServiceStatus | undefined;
    let wait = pause;
    try {
      current = await client.GET('/v1/projects/{project_id}/services/{service_id}', {
        params: { path },
        ...(signal ? { signal } : {}),
      });
      seen = current.status;
    } catch (err) {
      if (err instanceof BasinError && err.code === 'NOT_FOUND' && status === 'DELETED') {
        onStatus?.('DELETED', undefined);
        return lastBody ?? ({ ...path, status: 'DELETED' } as Service);
      }
      if (!isTransient(err)) throw err;
      wait = Math.max(pause, (err.retryAfterSeconds ?? 0) * 1000);
    }
    if (seen !== undefined) {
      lastBody = current;
      if (seen !== last) onStatus?.(seen, current);
      last = seen;
      if (seen === status) return current as Service;
      if (failOn.includes(seen)) {
        throw new BasinError(
          'WAIT_FAILED',
          `Service ${path.service_id} is ${seen}, not ${status}; its logs say why (basin: … entries).`,
        );
      }
    }
    const left = deadline - Date.now();
    if (left <= 0) {
      throw new BasinError(
        'WAIT_TIMEOUT',
        `Service ${path.service_id} did not become ${status} within ${Math.round(timeoutMs / 1000)} s (last seen ${last ?? 'nothing'}).`,
      );
    }
    await sleep(Math.min(wait, left), signal);
    pause = Math.min(pause * 1.5, maxIntervalMs);
  }
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(done, ms);
    function done() {
      signal?.removeEventListener('abort', abort);
      resolve();
    }
    function abort() {
      clearTimeout(timer);
      reject(signal?.reason);
    }
    signal?.addEventListener('abort', abort, { once: true });
  });
}
