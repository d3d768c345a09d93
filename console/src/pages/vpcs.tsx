// The project's VPCs, and each one's peerings.
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import type { Installation } from '../installation.js';
import { ErrorBox } from '../parts.js';
import { href } from '../router.js';
import type { Session } from '../session.js';

export function Vpcs({
  session,
  installation,
}: {
  session: Session;
  installation: Installation | undefined;
}) {
  const { client, projectId } = session;
  const queries = useQueryClient();
  const path = { project_id: projectId };
  const vpcs = useQuery({
    queryKey: ['vpcs', projectId],
    queryFn: () => client.GET('/v1/projects/{project_id}/vpcs', { params: { path } }),
  });
  const [name, setName] = useState('');
  const [cidr, setCidr] = useState('10.0.0.0/16');
  const [region, setRegion] = useState('');
  const create = useMutation({
    mutationFn: () =>
      client.POST('/v1/projects/{project_id}/vpcs', {
        params: { path },
        body: { name, cidr, region_code: region || (installation?.defaultRegion ?? '') },
      }),
    onSuccess: () => queries.invalidateQueries({ queryKey: ['vpcs', projectId] }),
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    create.mutate();
  };
  const list = vpcs.data ?? [];
  return (
    <>
      <h1>VPCs</h1>
      <ErrorBox error={vpcs.error} />
      {list.length === 0 ? (
        <p>{vpcs.isPending ? 'Loading…' : 'No VPCs yet.'}</p>
      ) : (
        <div className="table-wrap" role="region" aria-label="VPCs" tabIndex={0}>
          <table>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">ID</th>
                <th scope="col">CIDR</th>
                <th scope="col">Region</th>
              </tr>
            </thead>
            <tbody>
              {list.map((v) => (
                <tr key={v.id}>
                  <td>
                    <a href={href({ page: 'vpc', id: v.id ?? '' })}>{v.name}</a>
                  </td>
                  <td className="mono">{v.id}</td>
                  <td className="mono">{v.cidr}</td>
                  <td>{v.region_code}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <h2>Create VPC</h2>
      <form className="form" onSubmit={submit}>
        <label htmlFor="vpc-name">Name</label>
        <input id="vpc-name" required value={name} onChange={(e) => setName(e.target.value)} />
        <label htmlFor="vpc-cidr">CIDR (a private block, /16 to /28)</label>
        <input id="vpc-cidr" required value={cidr} onChange={(e) => setCidr(e.target.value)} />
        <label htmlFor="vpc-region">Region</label>
        <select id="vpc-region" value={region} onChange={(e) => setRegion(e.target.value)}>
          <option value="">Default ({installation?.defaultRegion ?? '…'})</option>
          {(installation?.regions ?? []).map((r) => (
            <option key={r}>{r}</option>
          ))}
        </select>
        <button type="submit" disabled={create.isPending}>
          Create VPC
        </button>
      </form>
      <ErrorBox error={create.error} />
    </>
  );
}

export function VpcPage({ session, id }: { session: Session; id: string }) {
  const { client, projectId } = session;
  const queries = useQueryClient();
  const path = { project_id: projectId, vpc_id: id };
  const vpc = useQuery({
    queryKey: ['vpc', projectId, id],
    queryFn: () => client.GET('/v1/projects/{project_id}/vpcs/{vpc_id}', { params: { path } }),
  });
  const peerings = useQuery({
    queryKey: ['peerings', projectId, id],
    queryFn: () =>
      client.GET('/v1/projects/{project_id}/vpcs/{vpc_id}/peerings', { params: { path } }),
    refetchInterval: 3000,
  });
  const [rename, setRename] = useState('');
  const [peer, setPeer] = useState({ peer_account_id: '', peer_region_code: '', peer_vpc_id: '' });
  const refresh = () => {
    queries.invalidateQueries({ queryKey: ['vpc', projectId, id] });
    queries.invalidateQueries({ queryKey: ['peerings', projectId, id] });
    queries.invalidateQueries({ queryKey: ['vpcs', projectId] });
  };
  const doRename = useMutation({
    mutationFn: () =>
      client.POST('/v1/projects/{project_id}/vpcs/{vpc_id}/rename', {
        params: { path },
        body: { name: rename },
      }),
    onSuccess: refresh,
  });
  const remove = useMutation({
    mutationFn: () =>
      client.DELETE('/v1/projects/{project_id}/vpcs/{vpc_id}', { params: { path } }),
    onSuccess: () => {
      queries.invalidateQueries({ queryKey: ['vpcs', projectId] });
      location.hash = href({ page: 'vpcs' });
    },
  });
  const addPeering = useMutation({
    mutationFn: () =>
      client.POST('/v1/projects/{project_id}/vpcs/{vpc_id}/peerings', {
        params: { path },
        body: peer,
      }),
    onSuccess: refresh,
  });
  const removePeering = useMutation({
    mutationFn: (peering_id: string) =>
      client.DELETE('/v1/projects/{project_id}/vpcs/{vpc_id}/peerings/{peering_id}', {
        params: { path: { ...path, peering_id } },
      }),
    onSuccess: refresh,
  });
  const v = vpc.data;
  const setPeerField = (k: keyof typeof peer) => (e: { target: { value: string } }) =>
    setPeer({ ...peer, [k]: e.target.value });
  return (
    <>
      <h1>VPC {v?.name ?? id}</h1>
      <ErrorBox error={vpc.error} />
      {v && (
        <dl className="facts">
          <dt>ID</dt>
          <dd className="mono">{v.id}</dd>
          <dt>CIDR</dt>
          <dd className="mono">{v.cidr}</dd>
          <dt>Region</dt>
          <dd>{v.region_code}</dd>
        </dl>
      )}
      <h2>Peerings</h2>
      {(peerings.data ?? []).length === 0 ? (
        <p>No peerings.</p>
      ) : (
        <ul className="plain">
          {(peerings.data ?? []).map((p) => (
            <li key={p.id}>
              <span className="mono">{p.peer_vpc_id}</span> in {p.peer_region_code} (account{' '}
              {p.peer_account_id}): {p.status}
              {p.error_message ? ` (${p.error_message})` : ''}{' '}
              <button
                type="button"
                className="secondary"
                onClick={() => p.id && removePeering.mutate(p.id)}
              >
                Delete peering {p.id}
              </button>
            </li>
          ))}
        </ul>
      )}
      <div className="settings">
        <form
          className="small-form"
          aria-label="New peering"
          onSubmit={(e) => {
            e.preventDefault();
            addPeering.mutate();
          }}
        >
          <h3>New peering</h3>
          <label htmlFor="peer-account">Peer account</label>
          <input
            id="peer-account"
            required
            value={peer.peer_account_id}
            onChange={setPeerField('peer_account_id')}
          />
          <label htmlFor="peer-region">Peer region</label>
          <input
            id="peer-region"
            required
            value={peer.peer_region_code}
            onChange={setPeerField('peer_region_code')}
          />
          <label htmlFor="peer-vpc">Peer VPC</label>
          <input
            id="peer-vpc"
            required
            value={peer.peer_vpc_id}
            onChange={setPeerField('peer_vpc_id')}
          />
          <button type="submit">Create peering</button>
        </form>
        <form
          className="small-form"
          aria-label="Rename VPC"
          onSubmit={(e) => {
            e.preventDefault();
            doRename.mutate();
          }}
        >
          <h3>Rename</h3>
          <label htmlFor="vpc-new-name">New name</label>
          <input
            id="vpc-new-name"
            required
            value={rename}
            onChange={(e) => setRename(e.target.value)}
          />
          <button type="submit">Rename</button>
        </form>
        <div className="small-form">
          <h3>Delete</h3>
          <button type="button" className="danger-button" onClick={() => remove.mutate()}>
            Delete VPC
          </button>
        </div>
      </div>
      <ErrorBox error={addPeering.error ?? removePeering.error ?? doRename.error ?? remove.error} />
    </>
  );
}
