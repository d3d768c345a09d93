// Talking to a running Basin (see installation.ts) the way a client does:
// HTTP requests with a credential, and polling for the asynchronous outcomes
// (statuses, deletions) with failure messages that quote Basin's own output.

import { AssertionError } from 'node:assert';
import { Agent, request as httpRequest } from 'node:http';
import type { Launched } from './launched.js';
import { waitTimer } from './wait-log.js';

/**
 * How often waits poll the API: every 50 ms for a wait's first 2 s, often
 * enough to see short states; then every 100 ms, and from 10 s on every
 * 250 ms: a wait that long is for something slow (a create, a failover), and
 * a suite bound by CPU pays for every poll twice (the test's request,
 * Basin's answer) while four files wait at once.
 */
const POLL_MS = (waitedMs: number) => (waitedMs < 2_000 ? 50 : waitedMs < 10_000 ? 100 : 250);
/**
 * How often a wait on a backup polls (with pitrWindowStart): a backup takes
 * seconds even alone, a minute on a busy machine, and 20 forks' checks a
 * second (POLL_MS) cost a tenth of a core while it runs (measured at load 23).
 */
export const BACKUP_POLL_MS = 500;
/** How often a request answered 429 is tried again (after its Retry-After) before the 429 is returned. */
const RATE_LIMIT_RETRIES = 5;

/**
 * A request over kept-alive connections of node:http, as a client library
 * does: a test polls its Basin thousands of times, and fetch() (undici)
 * costs the test's process about three times node:http's CPU a request
 * (1.0-1.6 ms against 0.2-0.5 ms, measured against one Basin), on a suite
 * bound by CPU. An idle connection is closed after 5 s, long before
 * Basin's keep-alive timeout (72 s); a kept-alive connection the server
 * closed as the request went out is tried once more on a new one (Node's
 * documented pattern, `reusedSocket`).
 */
function httpClient() {
  type Init = { method: string; headers: Record<string, string>; body: string | undefined };
  const agent = new Agent({ keepAlive: true, timeout: 5_000 });
  const once = (url: string, init: Init) =>
    new Promise<{ status: number; text: string; headers: Headers }>((resolve, reject) => {
      const req = httpRequest(url, { method: init.method, headers: init.headers, agent }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const headers = new Headers();
          for (const [name, value] of Object.entries(res.headers)) {
            for (const v of Array.isArray(value) ? value : [value ?? '']) headers.append(name, v);
          }
          const text = Buffer.concat(chunks).toString('utf8');
          resolve({ status: res.statusCode ?? 0, text, headers });
        });
      });
      req.on('error', (err) => reject(Object.assign(err, { reused: req.reusedSocket })));
      req.end(init.body);
    });
  return async (url: string, init: Init) => {
    try {
      return await once(url, init);
    } catch (err) {
      const { code, reused } = err as { code?: string; reused?: boolean };
      if (reused && (code === 'ECONNRESET' || code === 'EPIPE')) return once(url, init);
      throw err;
    }
  };
}

export interface HttpResult {
  status: number;
  /** The JSON body, or undefined when there is none. */
  body: any;
  text: string;
  headers: Headers;
}

export interface RequestOptions {
  /** Sent as JSON. */
  body?: unknown;
  /** Sent as it is, with whatever content-type `headers` give (a malformed or foreign body). */
  rawBody?: string;
  /** Replaces the default Authorization (Bearer `bearerKey`); `null` sends none. */
  authorization?: string | null;
  headers?: Record<string, string>;
  /** false: return a 429 rather than wait its Retry-After and try again. */
  retryRateLimited?: boolean;
}

/** A running Basin whose API answered. */
export interface BasinProcess extends Launched {
  /** http://127.0.0.1:<port>/v1 */
  readonly url: string;
  /** The bearer key requests carry unless told otherwise. */
  readonly bearerKey: string;
  /** The project that key sees (the first one listed). */
  readonly projectId: string;
  /** The credential Basin printed when it bootstrapped an empty data directory, if it did. */
  readonly printed: { bearerKey?: string; accessKey: string; secretKey: string } | undefined;
  /** A request to `url + path`, with `bearerKey` unless told otherwise. */
  request(method: string, path: string, options?: RequestOptions): Promise<HttpResult>;
  /** The same with a JSON body, with `bearerKey`. */
  call(method: string, path: string, body?: unknown): Promise<HttpResult>;
  /** `/projects/<projectId>/services[/<id>]` */
  servicePath(id?: string): string;
  /**
   * Polls until `fn` returns something truthy; the timeout error quotes
   * Basin's output. `pollMs` (POLL_MS's schedule by default): a longer pause for a
   * probe that costs more than a read and waits on something slow (a
   * backup).
   */
  waitFor<T>(
    fn: () => Promise<T | undefined | false>,
    what: string | (() => string),
    timeoutMs?: number,
    pollMs?: number,
  ): Promise<T>;
  /** Polls GET of a service until its status is `status` (3 minutes at most by default); returns that body. */
  waitForStatus(serviceId: string, status: string, timeoutMs?: number): Promise<any>;
  /** Polls until GET of a service answers 404. */
  waitGone(serviceId: string, timeoutMs?: number): Promise<void>;
  /** SIGTERM, then waits for the exit (SIGKILL and an error if it takes over `timeoutMs`). */
  stop(timeoutMs?: number): Promise<{ code: number | null; signal: string | null }>;
}

/**
 * Waits until the API of `proc` answers at `url` to `key` (by default, the
 * bearer key Basin prints when it bootstraps), and gives the means to use it.
 */
export async function answering(proc: Launched, url: string, key?: string): Promise<BasinProcess> {
  let running = true;
  void proc.exited.then(() => (running = false));
  const { tail } = proc;
  const field = (label: string) =>
    new RegExp(`^\\s*${label}:\\s+(\\S+)$`, 'm').exec(proc.output())?.[1];
  let bearerKey = key;
  const send = httpClient();

  const request = async (
    method: string,
    path: string,
    options: RequestOptions = {},
  ): Promise<HttpResult> => {
    const auth =
      options.authorization === undefined ? `Bearer ${bearerKey}` : options.authorization;
    for (let attempt = 0; ; attempt++) {
      const res = await send(url + path, {
        method,
        headers: {
          ...(auth === null ? {} : { authorization: auth }),
          ...(options.body === undefined ? {} : { 'content-type': 'application/json' }),
          ...options.headers,
        },
        body: options.body === undefined ? options.rawBody : JSON.stringify(options.body),
      });
      const { text } = res;
      // Rate limits are the server's to set: a client waits as told and tries
      // again, as every well-behaved client does, unless the test asks for the 429.
      if (
        res.status === 429 &&
        options.retryRateLimited !== false &&
        attempt < RATE_LIMIT_RETRIES
      ) {
        const seconds = Number(res.headers.get('retry-after'));
        await new Promise((r) =>
          setTimeout(r, Number.isFinite(seconds) && seconds > 0 ? seconds * 1000 : 1000),
        );
        continue;
      }
      const json = /\bjson\b/.test(res.headers.get('content-type') ?? '') && text !== '';
      return {
        status: res.status,
        body: json ? JSON.parse(text) : undefined,
        text,
        headers: res.headers,
      };
    }
  };

  const waitFor = async <T>(
    fn: () => Promise<T | undefined | false>,
    what: string | (() => string),
    timeoutMs = 60_000,
    pollMs?: number,
  ): Promise<T> => {
    const say = () => (typeof what === 'string' ? what : what());
    const started = Date.now();
    const deadline = started + timeoutMs;
    const timer = waitTimer(what);
    let last: unknown;
    for (;;) {
      try {
        const v = await fn();
        if (v) {
          timer();
          return v;
        }
      } catch (err) {
        // A failed assertion fails now; anything else (not listening yet, a
        // password not applied yet) is polled through, and told at the end.
        if (err instanceof AssertionError) {
          timer('failed');
          throw err;
        }
        last = err;
      }
      if (!running) {
        timer('Basin exited');
        throw new Error(`Basin exited while waiting for ${say()}:\n${tail()}`);
      }
      if (Date.now() > deadline) {
        timer('timed out');
        const why = last ? ` (last error: ${(last as Error).message})` : '';
        throw new Error(
          `timed out after ${timeoutMs} ms waiting for ${say()}${why}; Basin said:\n${tail()}`,
        );
      }
      await new Promise((r) => setTimeout(r, pollMs ?? POLL_MS(Date.now() - started)));
    }
  };

  const projects = await waitFor(
    async () => {
      bearerKey ??= field('Bearer key'); // printed before the API listens
      if (bearerKey === undefined) return undefined;
      const res = await request('GET', '/projects');
      return res.status === 200 ? (res.body as { id: string }[]) : undefined;
    },
    'the API to answer',
    60_000,
  );
  const accessKey = field('Access key');
  const secretKey = field('Secret key');

  const basin: BasinProcess = {
    ...proc,
    url,
    bearerKey: bearerKey as string,
    projectId: (projects[0] as { id: string }).id,
    printed:
      accessKey && secretKey ? { bearerKey: field('Bearer key'), accessKey, secretKey } : undefined,
    request,
    call: (method, path, body) => request(method, path, { body }),
    servicePath: (id) => `/projects/${basin.projectId}/services${id === undefined ? '' : `/${id}`}`,
    waitFor,
    async waitForStatus(serviceId, status, timeoutMs) {
      let seen = 'nothing';
      return waitFor(
        async () => {
          const res = await request('GET', basin.servicePath(serviceId));
          seen = `${res.status} ${res.body?.status ?? res.text}`;
          return res.status === 200 && res.body.status === status ? res.body : undefined;
        },
        () => `service ${serviceId} to be ${status} (last seen: ${seen})`,
        // A create or a restart on a machine whose cores the whole suite
        // keeps busy took more than a minute at times (a bound, not a time).
        timeoutMs ?? 180_000,
      );
    },
    async waitGone(serviceId, timeoutMs) {
      await waitFor(
        async () => (await request('GET', basin.servicePath(serviceId))).status === 404,
        `service ${serviceId} to be gone`,
        timeoutMs,
      );
    },
    async stop(timeoutMs = 40_000) {
      proc.signal('SIGTERM');
      const timer = setTimeout(() => proc.signal('SIGKILL'), timeoutMs);
      const result = await proc.exited;
      clearTimeout(timer);
      if (result.signal === 'SIGKILL') {
        throw new Error(`Basin did not stop within ${timeoutMs} ms of SIGTERM:\n${tail()}`);
      }
      return result;
    },
  };
  return basin;
}

/**
 * The end of the oldest kept backup of service `id`, from the 400 that a
 * PITR fork to a target in the future gets; undefined while it has no
 * backup yet (a 409). Each call costs Basin a fork's checks (a SCRAM
 * verifier, a transaction): about 4.5 ms of CPU with the test's side, nine
 * times a GET's, so a wait on it polls every BACKUP_POLL_MS, not POLL_MS.
 */
export async function pitrWindowStart(b: BasinProcess, id: string): Promise<string | undefined> {
  const res = await b.call('POST', `${b.servicePath(id)}/forkService`, {
    fork_strategy: 'PITR',
    target_time: new Date(Date.now() + 3_600_000).toISOString(),
  });
  if (res.status === 409) return undefined;
  if (res.status !== 400) throw new AssertionError({ message: `expected 400 or 409: ${res.text}` });
  const m = /^target_time must be between (\S+) and now \((\S+)\)/.exec(res.body.message);
  if (!m) throw new AssertionError({ message: res.text });
  return m[1];
}
