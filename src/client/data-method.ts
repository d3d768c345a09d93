// The typed methods of the client, in a module of their own: logs.ts and
// wait.ts need only GET (`Gets`), and basin-client.ts builds on them, so
// neither has to import the other.

import type { FetchResponse, MaybeOptionalInit } from 'openapi-fetch';
import type {
  HttpMethod,
  MediaType,
  PathsWithMethod,
  RequiredKeysOf,
} from 'openapi-typescript-helpers';
import type { paths } from './generated/openapi.js';

// openapi-fetch's own parameter shapes (its InitParam is not exported): the
// init argument is optional exactly when nothing in it is required.
type InitParam<Init> =
  RequiredKeysOf<Init> extends never
    ? [(Init & { [key: string]: unknown })?]
    : [Init & { [key: string]: unknown }];
type DataOf<R> = R extends { data?: infer D } ? Exclude<D, undefined> : never;
/** The success body of a call; `undefined` for answers without one (202/204). */
type Body<R> = [DataOf<R>] extends [never] ? undefined : DataOf<R>;

/** A method that answers the success body, and throws a BasinError for anything else. */
export type DataMethod<Paths extends object, M extends HttpMethod> = <
  P extends PathsWithMethod<Paths, M>,
  I extends MaybeOptionalInit<Paths[P], M & keyof Paths[P]>,
>(
  path: P,
  ...init: InitParam<I>
) => Promise<Body<FetchResponse<Operation<Paths[P], M>, I, MediaType>>>;
/** The operation of a path item for a method. */
type Operation<Item, M extends HttpMethod> = Item extends { [K in M]: infer O }
  ? O extends Record<string | number, unknown>
    ? O
    : never
  : never;

/** What paging through logs and waiting for a status need of a client: its GET. */
export interface Gets {
  GET: DataMethod<paths, 'get'>;
}
