import { Type } from '@sinclair/typebox';

const id = (what: string) => Type.String({ minLength: 1, maxLength: 64, description: what });

export const ProjectParams = Type.Object({ project_id: id('project id') });
export const VpcParams = Type.Object({ project_id: id('project id'), vpc_id: id('VPC id') });
export const PeeringParams = Type.Object({
  project_id: id('project id'),
  vpc_id: id('VPC id'),
  peering_id: id('peering id'),
});
export const ServiceParams = Type.Object({
  project_id: id('project id'),
  service_id: id('service id'),
});
export const ReplicaSetParams = Type.Object({
  project_id: id('project id'),
  service_id: id('service id'),
  replica_set_id: id('read replica set id'),
});
