import { Type } from '@sinclair/typebox';
import { ADDONS, FORK_STRATEGIES, SERVICE_STATUSES, SERVICE_TYPES } from '../../domain/types.js';
import {
  answeredTypes,
  DEFAULT_SERVICE_TYPE_NAME,
  type ServiceTypeName,
} from '../../domain/service-type-names.js';
import { ConnectionPooler, Endpoint, EnvironmentTag, literals, Metadata } from './common.js';
import { ref } from './ref.js';

const SizeString = (what: string) =>
  Type.String({ description: `${what} as a string, or "shared"` });

export const ReadReplicaSet = Type.Object(
  {
    id: Type.Optional(Type.String()),
    name: Type.Optional(Type.String()),
    nodes: Type.Optional(Type.Integer()),
    cpu_millis: Type.Optional(Type.Integer({ description: 'milli-cores' })),
    memory_gbs: Type.Optional(Type.Integer({ description: 'gigabytes' })),
    endpoint: Type.Optional(ref(Endpoint)),
    connection_pooler: Type.Optional(ref(ConnectionPooler)),
    metadata: Type.Optional(ref(Metadata)),
    status: Type.Optional(
      Type.Union(literals(['creating', 'active', 'resizing', 'deleting', 'error'])),
    ),
  },
  { $id: 'ReadReplicaSet' },
);

/**
 * Where a service is reached over its VPC. Sent twice, as the spec's
 * `vpcEndpoint` and as `vpc_endpoint`, which newer clients read.
 */
export const VpcEndpoint = Type.Object(
  { host: Type.String(), port: Type.Integer(), vpc_id: Type.String() },
  { $id: 'VpcEndpoint' },
);

/**
 * A service's type as answers carry it. At the spec's name, the spec's enum;
 * under the vendor's (--service-type-name TIMESCALEDB), the enum answers then
 * hold, so that the serializer writes them and the served document tells
 * generated clients what they will read, marked as Basin's departure from the
 * spec (docs/decisions.md, Service type names).
 */
const serviceType = (name: ServiceTypeName) =>
  name === DEFAULT_SERVICE_TYPE_NAME
    ? Type.Union(literals(SERVICE_TYPES))
    : Type.Union(literals(answeredTypes(name)), {
        description: `${name} is this installation's name for the spec's ${DEFAULT_SERVICE_TYPE_NAME} (--service-type-name); requests may use either`,
        'x-basin-extension': true,
      });

/** The Service body, with the time-series type named `typeName` (see serviceType). */
export const serviceSchema = (typeName: ServiceTypeName) =>
  Type.Object(
    {
      service_id: Type.Optional(Type.String()),
      project_id: Type.Optional(Type.String()),
      name: Type.Optional(Type.String()),
      region_code: Type.Optional(Type.String()),
      service_type: Type.Optional(serviceType(typeName)),
      status: Type.Optional(Type.Union(literals(SERVICE_STATUSES))),
      created: Type.Optional(Type.String({ format: 'date-time' })),
      endpoint: Type.Optional(ref(Endpoint)),
      connection_pooler: Type.Optional(ref(ConnectionPooler)),
      vpc_endpoint: Type.Optional(ref(VpcEndpoint)),
      vpcEndpoint: Type.Optional(ref(VpcEndpoint)),
      forked_from: Type.Optional(
        Type.Object({
          is_standby: Type.Boolean(),
          project_id: Type.String(),
          service_id: Type.String(),
        }),
      ),
      ha_replicas: Type.Optional(
        Type.Object({ replica_count: Type.Integer(), sync_replica_count: Type.Integer() }),
      ),
      initial_password: Type.Optional(Type.String({ format: 'password' })),
      metadata: Type.Optional(ref(Metadata)),
      metrics: Type.Optional(
        Type.Object(
          {
            memory_mb: Type.Integer(),
            milli_cpu: Type.Integer(),
            storage_mb: Type.Integer(),
          },
          {
            description:
              'usage, rounded to whole megabytes and millicores; storage_mb: what the largest of its nodes holds on disk (data, WAL, logs)',
          },
        ),
      ),
      storage: Type.Optional(
        Type.Object(
          {
            allowance_mb: Type.Integer({
              description: 'what its data may take (metrics.storage_mb is what it holds)',
            }),
            state: Type.Union(
              [
                Type.Literal('ok'),
                Type.Literal('read_only'),
                Type.Literal('recovery'),
                Type.Literal('stopped'),
              ],
              {
                description:
                  'ok; read_only: over its allowance, sessions start read-only (SET default_transaction_read_only = off to free space); recovery: past its ceiling, PostgreSQL runs in recovery and takes no write; stopped: past its limit, it does not run until resized',
              },
            ),
          },
          {
            description:
              "the service's storage allowance and where it stands (Basin's own field, beside the spec's; docs/decisions.md, Storage allowances)",
          },
        ),
      ),
      idle: Type.Optional(
        Type.Object(
          {
            state: Type.Union([Type.Literal('awake'), Type.Literal('suspended')], {
              description:
                'suspended: PostgreSQL is stopped after a time without client connections, and the next connection wakes it (the service stays READY)',
            }),
            since: Type.Optional(Type.String({ format: 'date-time' })),
          },
          {
            description:
              "whether the service sleeps, where the installation suspends idle services (Basin's own field; docs/decisions.md, Idle services)",
          },
        ),
      ),
      resources: Type.Optional(
        Type.Array(
          Type.Object({
            id: Type.String(),
            spec: Type.Object({
              cpu_millis: Type.Optional(
                Type.Integer({ description: 'milli-cores; absent for a shared service' }),
              ),
              memory_gbs: Type.Optional(
                Type.Integer({ description: 'gigabytes; absent for a shared service' }),
              ),
              volume_type: Type.String(),
            }),
          }),
        ),
      ),
      read_replica_sets: Type.Optional(Type.Array(ref(ReadReplicaSet))),
    },
    { $id: 'Service' },
  );

export const Service = serviceSchema(DEFAULT_SERVICE_TYPE_NAME);

export const ServiceCreateInput = Type.Object(
  {
    name: Type.String({ description: '1 to 128 characters' }),
    addons: Type.Optional(Type.Array(Type.Union(literals(ADDONS)), { uniqueItems: true })),
    cpu_millis: Type.Optional(SizeString('milli-cores')),
    memory_gbs: Type.Optional(SizeString('gigabytes')),
    environment_tag: Type.Optional(ref(EnvironmentTag)),
    region_code: Type.Optional(Type.String()),
    replica_count: Type.Optional(Type.Integer({ minimum: 0 })),
  },
  { $id: 'ServiceCreateInput', additionalProperties: false },
);

export const ServiceForkInput = Type.Object(
  {
    fork_strategy: Type.Union(literals(FORK_STRATEGIES)),
    target_time: Type.Optional(Type.String({ description: 'RFC 3339; required for PITR' })),
    cpu_millis: Type.Optional(SizeString('milli-cores')),
    memory_gbs: Type.Optional(SizeString('gigabytes')),
    name: Type.Optional(Type.String()),
    environment_tag: Type.Optional(ref(EnvironmentTag)),
  },
  { $id: 'ServiceForkInput', additionalProperties: false },
);

export const ServiceRenameInput = Type.Object(
  { name: Type.String({ description: 'the new name, 1 to 128 characters' }) },
  { $id: 'ServiceRenameInput', additionalProperties: false },
);

export const ResizeInput = Type.Object(
  { cpu_millis: Type.String(), memory_gbs: Type.String() },
  { $id: 'ResizeInput', additionalProperties: false },
);

export const ServiceVpcInput = Type.Object(
  { vpc_id: Type.String() },
  { $id: 'ServiceVpcInput', additionalProperties: false },
);

export const UpdatePasswordInput = Type.Object(
  { password: Type.String({ description: '8 to 256 characters' }) },
  { $id: 'UpdatePasswordInput', additionalProperties: false },
);

export const SetHAInput = Type.Object(
  {
    replica_count: Type.Optional(Type.Integer({ minimum: 0 })),
    sync_replica_count: Type.Optional(Type.Integer({ minimum: 0 })),
  },
  { $id: 'SetHAInput', additionalProperties: false },
);

export const ReplicaSetCreateInput = Type.Object(
  {
    cpu_millis: Type.Integer({ description: 'milli-cores' }),
    memory_gbs: Type.Integer({ description: 'gigabytes' }),
    name: Type.String(),
    nodes: Type.Integer({ minimum: 1 }),
  },
  { $id: 'ReplicaSetCreateInput', additionalProperties: false },
);

export const ReplicaSetResizeInput = Type.Object(
  { cpu_millis: Type.String(), memory_gbs: Type.String() },
  { $id: 'ReplicaSetResizeInput', additionalProperties: false },
);
