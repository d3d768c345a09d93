// basin/client: the typed TypeScript client of Basin's API (README, "The
// TypeScript client").

export { type BasinClient, type BasinClientOptions, createBasinClient } from './basin-client.js';
export {
  type ApiErrorCode,
  BasinError,
  type BasinErrorCode,
  type ClientErrorCode,
} from './errors.js';
export type { LogQuery, ServiceRef } from './logs.js';
export type { ServiceStatus, WaitOptions } from './wait.js';
export type { components, paths } from './generated/openapi.js';

import type { components } from './generated/openapi.js';

type Schemas = components['schemas'];
export type Service = Schemas['Service'];
export type ServiceCreateInput = Schemas['ServiceCreateInput'];
export type ReadReplicaSet = Schemas['ReadReplicaSet'];
export type Project = Schemas['Project'];
export type Vpc = Schemas['Vpc'];
export type Peering = Schemas['Peering'];
export type ServiceLogsResponse = Schemas['ServiceLogsResponse'];
export type LogEntry = NonNullable<ServiceLogsResponse['entries']>[number];
export type AuthInfo = Schemas['AuthInfo'];
export type ErrorBody = Schemas['ErrorBody'];
