import {
  ConnectionPooler,
  Endpoint,
  EnvironmentTag,
  ErrorBody,
  MessageResponse,
  Metadata,
  Project,
  SetEnvironmentInput,
} from './common.js';
import { ServiceLogsResponse } from './logs.js';
import {
  ReadReplicaSet,
  ReplicaSetCreateInput,
  ReplicaSetResizeInput,
  ResizeInput,
  Service,
  ServiceCreateInput,
  ServiceForkInput,
  ServiceVpcInput,
  SetHAInput,
  UpdatePasswordInput,
} from './service.js';
import { Peering, PeeringCreateInput, Vpc, VpcCreateInput, VpcRenameInput } from './vpc.js';

/** Every shared ($id) schema, registered once with Fastify and named in the OpenAPI document. */
export const SHARED_SCHEMAS = [
  ErrorBody,
  MessageResponse,
  Endpoint,
  ConnectionPooler,
  EnvironmentTag,
  SetEnvironmentInput,
  Metadata,
  Project,
  Vpc,
  VpcCreateInput,
  VpcRenameInput,
  Peering,
  PeeringCreateInput,
  ReadReplicaSet,
  Service,
  ServiceCreateInput,
  ServiceForkInput,
  ResizeInput,
  ServiceVpcInput,
  UpdatePasswordInput,
  SetHAInput,
  ReplicaSetCreateInput,
  ReplicaSetResizeInput,
  ServiceLogsResponse,
];
