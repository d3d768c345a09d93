// The Create form: the installation's sizes and regions, and the initial
// password shown once (Basin keeps only its hash).
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import type { ServiceCreateInput } from '../../../src/client/index.js';
import { type Installation, sizeFields } from '../installation.js';
import { CopyField, ErrorBox } from '../parts.js';
import { href } from '../router.js';
import type { Session } from '../session.js';

type Type = 'TIMESERIESDB' | 'POSTGRES' | 'VECTOR';
const TYPES: { value: Type; label: string }[] = [
  { value: 'TIMESERIESDB', label: 'TimescaleDB (time-series)' },
  { value: 'POSTGRES', label: 'PostgreSQL' },
  { value: 'VECTOR', label: 'PostgreSQL with pgvector' },
];

/** The API names the type by its addons. */
function addonsOf(type: Type, ai: boolean): ServiceCreateInput['addons'] {
  if (type === 'TIMESERIESDB') return ai ? ['time-series', 'ai'] : ['time-series'];
  return type === 'VECTOR' ? ['ai'] : [];
}

export function CreateService({
  session,
  installation,
}: {
  session: Session;
  installation: Installation | undefined;
}) {
  const { client, projectId } = session;
  const queries = useQueryClient();
  const [name, setName] = useState('');
  const [type, setType] = useState<Type>('TIMESERIESDB');
  const [ai, setAi] = useState(false);
  const [size, setSize] = useState('');
  const [region, setRegion] = useState('');
  const [replicas, setReplicas] = useState(0);
  const create = useMutation({
    mutationFn: (body: ServiceCreateInput) =>
      client.POST('/v1/projects/{project_id}/services', {
        params: { path: { project_id: projectId } },
        body,
      }),
    onSuccess: () => queries.invalidateQueries({ queryKey: ['services', projectId] }),
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    create.mutate({
      name,
      addons: addonsOf(type, ai),
      ...(size ? sizeFields(size) : {}),
      ...(region ? { region_code: region } : {}),
      replica_count: replicas,
    });
  };

  const created = create.data;
  if (created) {
    return (
      <>
        <h1>Service created</h1>
        <p>
          <strong>{created.name}</strong> ({created.service_id}) is {created.status}. Its password
          for <span className="mono">tsdbadmin</span> is shown only now: copy it.
        </p>
        <CopyField
          id="initial-password"
          label="Initial password"
          value={created.initial_password ?? ''}
        />
        <p>
          <a className="button" href={href({ page: 'service', id: created.service_id ?? '' })}>
            Open {created.name}
          </a>
        </p>
      </>
    );
  }
  const sizes = installation?.sizes ?? [];
  const regions = installation?.regions ?? [];
  return (
    <>
      <h1>Create service</h1>
      <form className="form" onSubmit={submit}>
        <label htmlFor="name">Name</label>
        <input
          id="name"
          required
          maxLength={128}
          value={name}
          onChange={(e) => setName(e.target.value)}
        />

        <label htmlFor="type">Type</label>
        <select id="type" value={type} onChange={(e) => setType(e.target.value as Type)}>
          {TYPES.map((t) => (
            <option key={t.value} value={t.value}>
              {t.label}
            </option>
          ))}
        </select>

        <fieldset>
          <legend>Addons</legend>
          <label className="check">
            <input
              type="checkbox"
              checked={type === 'VECTOR' || ai}
              disabled={type !== 'TIMESERIESDB'}
              onChange={(e) => setAi(e.target.checked)}
            />
            ai (pgvector)
          </label>
        </fieldset>

        <label htmlFor="size">Size</label>
        <select id="size" value={size} onChange={(e) => setSize(e.target.value)}>
          <option value="">Default (the smallest dedicated size)</option>
          {sizes.map((s) => (
            <option key={s} value={s}>
              {s}
            </option>
          ))}
        </select>

        <label htmlFor="region">Region</label>
        <select id="region" value={region} onChange={(e) => setRegion(e.target.value)}>
          <option value="">Default ({installation?.defaultRegion ?? '…'})</option>
          {regions.map((r) => (
            <option key={r} value={r}>
              {r}
            </option>
          ))}
        </select>

        <label htmlFor="replicas">HA replicas</label>
        <input
          id="replicas"
          type="number"
          min={0}
          value={replicas}
          onChange={(e) => setReplicas(Number(e.target.value))}
        />

        <button type="submit" disabled={create.isPending}>
          {create.isPending ? 'Creating…' : 'Create service'}
        </button>
      </form>
      <ErrorBox error={create.error} />
    </>
  );
}
