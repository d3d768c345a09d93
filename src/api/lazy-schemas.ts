// Request validators and response serializers compiled when a route first
// uses them, not when it is registered. Fastify compiles, at start-up, an Ajv
// validator for every route and request part (HEAD twins included) and a
// fast-json-stringify serializer for every route and status: about 0.5 s
// of the 1.2 s of CPU a Basin on the sim driver spent before its first
// answer (docs/architecture.md §6), while a Basin of the tests, or of a person,
// answers a handful of routes. What is compiled is what Fastify's own
// compilers make, with the same Ajv instance and options, so answers and
// error messages are the same, byte for byte; only when changes.
//
// A schema that does not compile would then fail its route's first request
// (a 500) instead of the start: `compileEverySchema` compiles every one
// still pending, and test/api/lazy-schemas.test.ts runs it over the whole API.

import ValidatorSelector from '@fastify/ajv-compiler';
import type { FastifyServerOptions } from 'fastify';

type Factories = NonNullable<
  NonNullable<FastifyServerOptions['schemaController']>['compilersFactory']
>;
type ValidatorFactory = NonNullable<Factories['buildValidator']>;
type AnyFunction = (this: unknown, ...args: unknown[]) => unknown;

/** The compilations one app has put off, until they run. */
export class LazySchemas {
  private readonly pending = new Set<() => void>();

  /** How many are still put off. */
  get waiting(): number {
    return this.pending.size;
  }

  /** Compiles everything still put off; throws the first schema's error. */
  compileAll(): void {
    for (const compile of [...this.pending]) compile();
  }

  /**
   * A function that behaves as `compile()`'s result, compiled at its first
   * call or when one of `forwarded` is read (Fastify reads an Ajv
   * validator's `errors` after a call and its `schemaEnv` before one).
   */
  defer<F extends AnyFunction>(compile: () => F, forwarded: readonly string[] = []): F {
    let fn: F | undefined;
    const get = (): F => {
      if (fn === undefined) {
        fn = compile();
        this.pending.delete(get);
      }
      return fn;
    };
    this.pending.add(get);
    const deferred = function (this: unknown, ...args: unknown[]) {
      return get().apply(this, args);
    };
    for (const name of forwarded) {
      Object.defineProperty(deferred, name, {
        get: () => (get() as unknown as Record<string, unknown>)[name],
      });
    }
    return deferred as F;
  }

  /** Fastify's own Ajv compiler (@fastify/ajv-compiler), each route's validator deferred. */
  validators(): ValidatorFactory {
    const select = ValidatorSelector();
    type Select = typeof select;
    return ((externalSchemas: Parameters<Select>[0], options: Parameters<Select>[1]) => {
      const compile = select(externalSchemas, options);
      return (route: { schema: unknown; httpPart?: string }) => {
        // Fastify lowercases a headers schema's names only for its own
        // compiler, not for a custom one like this: no route validates
        // request headers, and one that did would need it done here.
        if (route.httpPart === 'headers')
          throw new Error('request headers schemas are not supported (api/lazy-schemas.ts)');
        return this.defer(
          () => compile(route as Parameters<typeof compile>[0]) as unknown as AnyFunction,
          ['errors', 'schemaEnv'],
        );
      };
    }) as ValidatorFactory;
  }
}

/** The LazySchemas of each app built by app.ts. */
const ofApp = new WeakMap<object, LazySchemas>();

export function rememberLazySchemas(app: object, lazy: LazySchemas): void {
  ofApp.set(app, lazy);
}

/**
 * Compiles every validator and serializer `app` has not compiled yet (after
 * `app.ready()`); returns how many there were.
 */
export function compileEverySchema(app: object): number {
  const lazy = ofApp.get(app);
  if (!lazy) throw new Error('not an app of app.ts');
  const n = lazy.waiting;
  lazy.compileAll();
  return n;
}
