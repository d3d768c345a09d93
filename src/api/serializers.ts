// Response serializers compiled once per distinct schema. Fastify compiles a
// serializer for every route × status, and most routes share their shapes
// (the error body, Service, the message): caching by schema cuts start-up
// (and every test's setup) from about a second to a fraction of it.
//
// A body marked with `immutableBody` is serialized once per serializer: its
// JSON is kept (in a WeakMap, so it goes with the body) and reused every time
// the same object is answered again, e.g. a presented service reused while
// nothing about it changes (see presented-cache.ts).

import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';
import { deepFreeze } from '../lib/freeze.js';
import type { LazySchemas } from './lazy-schemas.js';

type Factory = ReturnType<typeof SerializerSelector>;

const immutable = new WeakSet<object>();

/** Deep-freezes `body` and lets serializers keep its JSON. */
export function immutableBody<T extends object>(body: T): T {
  deepFreeze(body);
  immutable.add(body);
  return body;
}

/** A response serializer, as Fastify compiled it for a route and status. */
export type Serializer = (data: unknown) => string;

/**
 * The serializer Fastify compiled for each route and status, by
 * `routeSerializerKey`: the fast lane (polling-fast-lane.ts) answers with the
 * very function Fastify uses, so its bodies are Fastify's, byte for byte.
 */
export type RouteSerializers = Map<string, Serializer>;

export function routeSerializerKey(method: string, url: string, status: number | string): string {
  return `${method} ${url} ${status}`;
}

/**
 * The compiler factory for Fastify's schemaController; records what it
 * compiles in `routes`. With `lazy`, each serializer is compiled at its
 * first use (lazy-schemas.ts).
 */
export function cachedSerializers(routes?: RouteSerializers, lazy?: LazySchemas): Factory {
  return (externalSchemas, options) => {
    const compile = SerializerSelector()(externalSchemas, options);
    const cache = new Map<string, Serializer>();
    return (route) => {
      const key = JSON.stringify(route.schema);
      let serializer = cache.get(key);
      if (!serializer) {
        serializer = lazy
          ? lazy.defer(() => keepingJson(compile(route)) as (data: unknown) => string)
          : keepingJson(compile(route));
        cache.set(key, serializer);
      }
      routes?.set(routeSerializerKey(route.method, route.url, route.httpStatus), serializer);
      return serializer;
    };
  };
}

function keepingJson(serialize: Serializer): Serializer {
  const kept = new WeakMap<object, string>();
  return (data) => {
    if (typeof data !== 'object' || data === null || !immutable.has(data)) return serialize(data);
    let json = kept.get(data);
    if (json === undefined) {
      json = serialize(data);
      kept.set(data, json);
    }
    return json;
  };
}
