// What a service connects through: its pooler, a VPC, read replica sets.
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import type { Service } from '../../../src/client/index.js';
import { type Installation, sizeFields } from '../installation.js';
import { ErrorBox, StatusBadge } from '../parts.js';
import type { Session } from '../session.js';

export function Pooler({ session, svc }: { session: Session; svc: Service }) {
  const { client, projectId } = session;
  const queries = useQueryClient();
  const path = { project_id: projectId, service_id: svc.service_id ?? '' };
  const on = Boolean(svc.connection_pooler?.endpoint);
  const toggle = useMutation({
    mutationFn: () =>
      on
        ? client.POST('/v1/projects/{project_id}/services/{service_id}/disablePooler', {
            params: { path },
          })
        : client.POST('/v1/projects/{project_id}/services/{service_id}/enablePooler', {
            params: { path },
          }),
    onSuccess: () =>
      queries.invalidateQueries({ queryKey: ['service', projectId, path.service_id] }),
  });
  return (
    <div className="small-form">
      <h3>Connection pooler</h3>
      <p>
        {on
          ? `On, at ${svc.connection_pooler?.endpoint?.host}:${svc.connection_pooler?.endpoint?.port}`
          : 'Off'}
      </p>
      <button type="button" disabled={toggle.isPending} onClick={() => toggle.mutate()}>
        {on ? 'Disable pooler' : 'Enable pooler'}
      </button>
      <ErrorBox error={toggle.error} />
    </div>
  );
}

export function VpcAttachment({ session, svc }: { session: Session; svc: Service }) {
  const { client, projectId } = session;
  const queries = useQueryClient();
  const path = { project_id: projectId, service_id: svc.service_id ?? '' };
  const vpcs = useQuery({
    queryKey: ['vpcs', projectId],
    queryFn: () =>
      client.GET('/v1/projects/{project_id}/vpcs', { params: { path: { project_id: projectId } } }),
  });
  const [vpc, setVpc] = useState('');
  const attached = svc.vpc_endpoint?.vpc_id;
  const change = useMutation({
    mutationFn: (vpc_id: string) =>
      attached
        ? client.POST('/v1/projects/{project_id}/services/{service_id}/detachFromVPC', {
            params: { path },
            body: { vpc_id },
          })
        : client.POST('/v1/projects/{project_id}/services/{service_id}/attachToVPC', {
            params: { path },
            body: { vpc_id },
          }),
    onSuccess: () =>
      queries.invalidateQueries({ queryKey: ['service', projectId, path.service_id] }),
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    change.mutate(attached ?? vpc);
  };
  return (
    <form className="small-form" onSubmit={submit} aria-label="VPC">
      <h3>VPC</h3>
      {attached ? (
        <p>
          Attached to <span className="mono">{attached}</span> at{' '}
          <span className="mono">
            {svc.vpc_endpoint?.host}:{svc.vpc_endpoint?.port}
          </span>
        </p>
      ) : (
        <>
          <label htmlFor="attach-vpc">Attach to</label>
          <select id="attach-vpc" required value={vpc} onChange={(e) => setVpc(e.target.value)}>
            <option value="">Choose a VPC</option>
            {(vpcs.data ?? []).map((v) => (
              <option key={v.id} value={v.id}>
                {v.name} ({v.cidr})
              </option>
            ))}
          </select>
        </>
      )}
      <button type="submit" disabled={change.isPending}>
        {attached ? 'Detach' : 'Attach'}
      </button>
      <ErrorBox error={change.error ?? vpcs.error} />
    </form>
  );
}

export function ReplicaSets({
  session,
  svc,
  installation,
}: {
  session: Session;
  svc: Service;
  installation: Installation | undefined;
}) {
  const { client, projectId } = session;
  const queries = useQueryClient();
  const path = { project_id: projectId, service_id: svc.service_id ?? '' };
  const sets = useQuery({
    queryKey: ['replicaSets', projectId, path.service_id],
    queryFn: () =>
      client.GET('/v1/projects/{project_id}/services/{service_id}/replicaSets', {
        params: { path },
      }),
    refetchInterval: 3000,
  });
  const [name, setName] = useState('');
  const [nodes, setNodes] = useState(1);
  const [size, setSize] = useState('');
  const refresh = () =>
    queries.invalidateQueries({ queryKey: ['replicaSets', projectId, path.service_id] });
  const create = useMutation({
    mutationFn: () => {
      const s = sizeFields(size);
      return client.POST('/v1/projects/{project_id}/services/{service_id}/replicaSets', {
        params: { path },
        body: { name, nodes, cpu_millis: Number(s.cpu_millis), memory_gbs: Number(s.memory_gbs) },
      });
    },
    onSuccess: refresh,
  });
  const remove = useMutation({
    mutationFn: (replica_set_id: string) =>
      client.DELETE(
        '/v1/projects/{project_id}/services/{service_id}/replicaSets/{replica_set_id}',
        { params: { path: { ...path, replica_set_id } } },
      ),
    onSuccess: refresh,
  });
  const dedicated = (installation?.sizes ?? []).filter((s) => s !== 'shared');
  return (
    <section aria-labelledby="replica-sets">
      <h2 id="replica-sets">Read replica sets</h2>
      {(sets.data ?? []).length === 0 ? (
        <p>None.</p>
      ) : (
        <ul className="plain">
          {(sets.data ?? []).map((r) => (
            <li key={r.id}>
              <strong>{r.name}</strong> <StatusBadge status={r.status} /> {r.nodes} nodes,{' '}
              {r.cpu_millis}m / {r.memory_gbs} GB
              {r.endpoint && (
                <span className="mono">
                  {' '}
                  {r.endpoint.host}:{r.endpoint.port}
                </span>
              )}{' '}
              <button
                type="button"
                className="secondary"
                disabled={remove.isPending}
                onClick={() => r.id && remove.mutate(r.id)}
              >
                Delete {r.name}
              </button>
            </li>
          ))}
        </ul>
      )}
      <form
        className="small-form"
        aria-label="New read replica set"
        onSubmit={(e) => {
          e.preventDefault();
          create.mutate();
        }}
      >
        <h3>New read replica set</h3>
        <label htmlFor="rs-name">Name</label>
        <input id="rs-name" required value={name} onChange={(e) => setName(e.target.value)} />
        <label htmlFor="rs-nodes">Nodes</label>
        <input
          id="rs-nodes"
          type="number"
          min={1}
          value={nodes}
          onChange={(e) => setNodes(Number(e.target.value))}
        />
        <label htmlFor="rs-size">Size</label>
        <select id="rs-size" required value={size} onChange={(e) => setSize(e.target.value)}>
          <option value="">Choose a size</option>
          {dedicated.map((s) => (
            <option key={s}>{s}</option>
          ))}
        </select>
        <button type="submit" disabled={create.isPending}>
          Create replica set
        </button>
      </form>
      <ErrorBox error={create.error ?? remove.error ?? sets.error} />
    </section>
  );
}
