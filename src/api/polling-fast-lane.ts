// The fast lane for polling clients: `GET /v1/projects/{p}/services/{s}`
// (and the list, `GET /v1/projects/{p}/services`) answered before Fastify
// sees the request, when everything goes well.
//
// Why: a client waiting for its service to become READY (and every
// dashboard after that) polls this one URL, and the target for it (issue 6)
// is 0.8 of the requests/s of a bare node:http server. Fastify alone, one
// route answering a pre-serialized string with no hook, logger or schema,
// measures 0.78-0.85 of bare; Basin's own work (authentication, the commit
// check, the rate limit, the access line) comes on top. Per request on the
// development machine: bare 12.1 µs of CPU, the Fastify floor 15.4, Basin
// through Fastify 20.6 (bench/README.md). What Fastify does per request
// (Request and Reply objects, routing, hook runners, the reply's checks) is
// what this file skips, for this one request shape only.
//
// What it answers: method GET, the exact path (no query string, no trailing
// slash, no encoding), no body, a credential that authenticates (the same
// `authenticate`, over the request's read view: the same commit check and
// cache), the project visible to it, the service in that project, and a read
// left in the credential's budget (the same counts as @fastify/rate-limit's,
// rate-limit.ts). The body is the one the route would answer: the same
// presented objects (presented-cache.ts) through the very serializer Fastify
// compiled for the route's 200 (serializers.ts), so the same bytes, with the
// headers Fastify sends for it (Node adds Date, Connection and Keep-Alive to
// both). The access line is the same line (access-log.ts), with a request
// id from the same counter as Fastify's, and the request is counted in the
// same Prometheus histogram (metrics/basin-metrics.ts).
//
// Everything else goes to Fastify untouched, having changed nothing: no
// credential or a bad one, an unknown project or service, a read replica
// set's id (the route answers those too), a read over budget, HEAD, a query
// string, any other route, any error while preparing the answer, and every
// request once Fastify is closing (it answers 503 then). So every error still
// leaves through the one error handler, and the lane never answers anything
// Fastify would answer differently: test/api/polling-fast-lane.test.ts sends
// the same requests to an app with the lane and one without, and compares
// status, headers and bodies byte for byte.

import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import { listServices } from '../commands/service-lookup.js';
import type { ReadView } from '../store/store.js';
import type { AccessLog } from './access-log.js';
import { authenticate } from './auth.js';
import type { PresentedServices } from './presented-cache.js';
import type { RegisteredLimits } from './rate-limit.js';
import { routeSerializerKey, type RouteSerializers, type Serializer } from './serializers.js';

/** The routes the lane stands in for, as Fastify names them (and the access log shows them). */
export const SERVICE_ROUTE = '/v1/projects/:project_id/services/:service_id';
export const SERVICE_LIST_ROUTE = '/v1/projects/:project_id/services';
const PROJECTS = '/v1/projects/';
const SERVICES = '/services';
/** What Fastify sets for a serialized JSON body; Content-Length follows. */
const JSON_TYPE = 'application/json; charset=utf-8';

export interface PollingFastLaneDeps {
  readView(): ReadView;
  presented: PresentedServices;
  /** The serializers Fastify compiled, by route and status. */
  serializers: RouteSerializers;
  takeRead: RegisteredLimits['takeRead'];
  /** Absent when the app logs nothing. */
  accessLog: AccessLog | undefined;
  nextRequestId: () => string;
  /** Counts an answered request as Fastify's onResponse hook does (metrics/); absent without metrics. */
  observe?: ((method: string, route: string, status: number, ms: number) => void) | undefined;
}

/** A body's bytes and the headers to send with them. */
interface Encoded {
  bytes: Buffer;
  headers: { 'content-type': string; 'content-length': string };
}

export class PollingFastLane {
  private closing = false;
  private serializers: { one: Serializer; list: Serializer } | undefined;
  /** A service's body encoded, by presented body: reused while nothing about the service changes. */
  private readonly encoded = new WeakMap<object, Encoded>();
  /** The last list answered, per project (listAnswer). */
  private readonly lists = new Map<string, { bodies: readonly object[]; answer: Encoded }>();

  constructor(private readonly deps: PollingFastLaneDeps) {}

  /** From now on every request goes to Fastify (called when it starts closing). */
  close(): void {
    this.closing = true;
  }

  /** Answers `req` and returns true, or returns false having done nothing observable. */
  offer(req: IncomingMessage, res: ServerResponse): boolean {
    if (req.method !== 'GET' || this.closing) return false;
    // The path: /v1/projects/{p}/services or /v1/projects/{p}/services/{s},
    // exactly (no query string, no trailing slash). Odd or encoded ids need
    // no check here: they are not found below.
    const url = req.url as string;
    if (!url.startsWith(PROJECTS)) return false;
    const slash = url.indexOf('/', PROJECTS.length);
    if (slash < 0 || !url.startsWith(SERVICES, slash)) return false;
    const projectId = url.slice(PROJECTS.length, slash);
    const rest = slash + SERVICES.length;
    let serviceId: string | undefined; // undefined: the list
    if (url.length > rest) {
      if (url.charCodeAt(rest) !== 0x2f /* / */) return false;
      serviceId = url.slice(rest + 1);
      if (serviceId.includes('/') || serviceId.includes('?')) return false;
    }
    // A body, or a version constraint for Fastify's router: Fastify's business.
    const headers = req.headers;
    const authorization = headers.authorization;
    if (
      authorization === undefined ||
      headers['content-length'] !== undefined ||
      headers['transfer-encoding'] !== undefined ||
      headers['accept-version'] !== undefined
    ) {
      return false;
    }
    const start = performance.now();
    const serializers = (this.serializers ??= this.findSerializers());
    if (serializers === undefined) return false;

    let credentialId: string;
    let answer: Encoded;
    try {
      const view = this.deps.readView();
      const principal = authenticate(view, authorization);
      if (!principal.projectIds.has(projectId)) return false;
      if (serviceId === undefined) {
        // As the list route answers: every service of the project, each as a
        // GET presents it. The array is new each time, so its serializer would
        // write every service afresh, on the event loop, at every list (2,000
        // services: ~900 kB); each body's JSON, kept by the GET's serializer
        // while the body is reused (serializers.ts), joined as the array's
        // serializer joins its items, is the same bytes
        // (test/api/polling-fast-lane.test.ts compares them).
        const bodies = listServices(view, principal, projectId).map((svc) =>
          this.deps.presented.read(svc, view),
        );
        answer = this.listAnswer(projectId, bodies, serializers.one);
      } else {
        const svc = view.services.get(serviceId);
        // Not found, or a read replica set's id (answered as a service by the route): Fastify's.
        if (svc === undefined || svc.projectId !== projectId) return false;
        const body = this.deps.presented.read(svc, view);
        answer = this.encoded.get(body) ?? this.keep(body, encode(serializers.one(body)));
      }
      credentialId = principal.credentialId;
    } catch {
      // A 401, or anything unexpected: Fastify answers it, through the error handler.
      return false;
    }
    // Last, so that a request left to Fastify is counted there, and only there.
    const ip = req.socket.remoteAddress;
    if (!this.deps.takeRead(credentialId, ip)) return false;

    res.writeHead(200, answer.headers);
    res.end(answer.bytes);
    const route = serviceId === undefined ? SERVICE_LIST_ROUTE : SERVICE_ROUTE;
    const ms = performance.now() - start;
    this.deps.accessLog?.write(this.deps.nextRequestId(), 'GET', route, 200, ms, ip, credentialId);
    this.deps.observe?.('GET', route, 200, ms);
    return true;
  }

  /** The serializers Fastify compiled for the routes' 200s (all routes are compiled before listening). */
  private findSerializers(): { one: Serializer; list: Serializer } | undefined {
    const one = this.deps.serializers.get(routeSerializerKey('GET', SERVICE_ROUTE, 200));
    const list = this.deps.serializers.get(routeSerializerKey('GET', SERVICE_LIST_ROUTE, 200));
    return one && list ? { one, list } : undefined;
  }

  /**
   * A list's bytes: the last ones answered for the project while every body
   * in it is the very same (frozen) object, in the same order: at 2,000
   * services the join and its copy into a buffer (~1 MB) are most of what
   * is left of a list once the bodies are reused (presented-cache.ts).
   */
  private listAnswer(projectId: string, bodies: readonly object[], one: Serializer): Encoded {
    const last = this.lists.get(projectId);
    if (last !== undefined && sameItems(last.bodies, bodies)) return last.answer;
    const answer = encode(`[${bodies.map((b) => one(b)).join(',')}]`);
    if (bodies.every((b) => Object.isFrozen(b))) {
      if (this.lists.size >= MAX_LISTS_KEPT) this.lists.clear();
      this.lists.set(projectId, { bodies, answer });
    }
    return answer;
  }

  /** Kept only for bodies the presented cache reuses (frozen); others are new each time. */
  private keep(body: object, answer: Encoded): Encoded {
    if (Object.isFrozen(body)) this.encoded.set(body, answer);
    return answer;
  }
}

/** Projects whose last list is kept (each holds its bytes: ~0.5 kB a service). */
const MAX_LISTS_KEPT = 64;

function sameItems(a: readonly object[], b: readonly object[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function encode(json: string): Encoded {
  const bytes = Buffer.from(json, 'utf8');
  return { bytes, headers: { 'content-type': JSON_TYPE, 'content-length': String(bytes.length) } };
}
