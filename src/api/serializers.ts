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

type Factory = ReturnType<typeof SerializerSelector>;

const immutable = new WeakSet<object>();

/** Deep-freezes `body` and lets serializers keep its JSON. */
export function immutableBody<T extends object>(body: T): T {
  deepFreeze(body);
  immutable.add(body);
  return body;
}

export const cachedSerializers: Factory = (externalSchemas, options) => {
  const compile = SerializerSelector()(externalSchemas, options);
  const cache = new Map<string, ReturnType<typeof compile>>();
  return (route) => {
    const key = JSON.stringify(route.schema);
    let serializer = cache.get(key);
    if (!serializer) {
      serializer = keepingJson(compile(route));
      cache.set(key, serializer);
    }
    return serializer;
  };
};

function keepingJson(serialize: (data: unknown) => string): (data: unknown) => string {
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
