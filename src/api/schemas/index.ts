import {
  DEFAULT_SERVICE_TYPE_NAME,
  type ServiceTypeName,
} from '../../domain/service-type-names.js';
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
import { AnalyticsIdentifyInput, AnalyticsResponse, AnalyticsTrackInput } from './analytics.js';
import { AuthInfo, AuthInfoApiKey, AuthInfoProject, AuthInfoUser, LogoutInput } from './auth.js';
import { ServiceLogsResponse } from './logs.js';
import {
  MetricDataPoint,
  MetricLabelFilter,
  MetricSeries,
  MetricsSeriesRequest,
} from './metrics.js';
import {
  ReadReplicaSet,
  ReplicaSetCreateInput,
  ReplicaSetResizeInput,
  ResizeInput,
  Service,
  serviceSchema,
  ServiceCreateInput,
  ServiceForkInput,
  ServiceRenameInput,
  ServiceVpcInput,
  SetHAInput,
  UpdatePasswordInput,
  VpcEndpoint,
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
  VpcEndpoint,
  Service,
  ServiceCreateInput,
  ServiceForkInput,
  ServiceRenameInput,
  ResizeInput,
  ServiceVpcInput,
  UpdatePasswordInput,
  SetHAInput,
  ReplicaSetCreateInput,
  ReplicaSetResizeInput,
  ServiceLogsResponse,
  MetricLabelFilter,
  MetricsSeriesRequest,
  MetricDataPoint,
  MetricSeries,
  AuthInfoUser,
  AuthInfoProject,
  AuthInfoApiKey,
  AuthInfo,
  LogoutInput,
  AnalyticsIdentifyInput,
  AnalyticsTrackInput,
  AnalyticsResponse,
];

/**
 * The shared schemas of an installation: under another name for the
 * time-series type, its Service body (schemas/service.ts); at the spec's, the
 * very schemas above, so the served document is openapi.json byte for byte.
 */
export function sharedSchemas(serviceTypeName: ServiceTypeName) {
  if (serviceTypeName === DEFAULT_SERVICE_TYPE_NAME) return SHARED_SCHEMAS;
  return SHARED_SCHEMAS.map((s) => (s === Service ? serviceSchema(serviceTypeName) : s));
}
