import { conflict, notFound } from '../domain/errors.js';
import type { ReplicaSet, Service } from '../domain/types.js';
import type { ReadRepos, ReadView } from '../store/store.js';
import { type Principal, visibleProject } from './context.js';

/**
 * The project's services, from a request's read view (a GET's: see
 * docs/architecture.md §5), or a 404 for a project the principal cannot see.
 */
export function listServices(
  reads: Pick<ReadView, 'services'>,
  p: Principal,
  projectId: string,
): readonly Service[] {
  return reads.services.listByProject(visibleProject(p, projectId));
}

/**
 * The service a request names, or a 404. A read replica set id is answered
 * with a CONFLICT that points at the replica set endpoints, since the id is
 * valid but the request is not one a replica set takes.
 */
export async function loadService(
  repos: ReadRepos,
  p: Principal,
  projectId: string,
  serviceId: string,
): Promise<Service> {
  visibleProject(p, projectId);
  const svc = await repos.services.get(serviceId);
  if (svc && svc.projectId === projectId) return svc;
  const rs = await repos.replicaSets.get(serviceId);
  if (rs && rs.projectId === projectId) {
    throw conflict(
      `${serviceId} is a read replica set of service ${rs.serviceId}; manage it under /projects/${projectId}/services/${rs.serviceId}/replicaSets/${serviceId}.`,
    );
  }
  throw notFound(`Service ${serviceId} not found in project ${projectId}.`);
}

/**
 * A service, or a read replica set seen as a service (GET /services/{id},
 * its logs), from a request's read view.
 */
export function loadServiceOrReplica(
  reads: Pick<ReadView, 'services' | 'replicaSets'>,
  p: Principal,
  projectId: string,
  id: string,
): { service: Service } | { replicaSet: ReplicaSet; primary: Service } {
  visibleProject(p, projectId);
  const svc = reads.services.get(id);
  if (svc && svc.projectId === projectId) return { service: svc };
  const rs = reads.replicaSets.get(id);
  if (rs && rs.projectId === projectId) {
    const primary = reads.services.get(rs.serviceId);
    if (primary) return { replicaSet: rs, primary };
  }
  throw notFound(`Service ${id} not found in project ${projectId}.`);
}

export async function loadReplicaSet(
  repos: ReadRepos,
  p: Principal,
  projectId: string,
  serviceId: string,
  replicaSetId: string,
): Promise<{ service: Service; replicaSet: ReplicaSet }> {
  const service = await loadService(repos, p, projectId, serviceId);
  const replicaSet = await repos.replicaSets.get(replicaSetId);
  if (!replicaSet || replicaSet.serviceId !== service.id) {
    throw notFound(`Read replica set ${replicaSetId} not found in service ${serviceId}.`);
  }
  return { service, replicaSet };
}
