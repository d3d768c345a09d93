// A service's page: what it is, how to connect, and what can be done to it.
// Every action shows progress until the service reaches its state.
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, type ReactNode, useEffect, useState } from 'react';
import { BasinError, type Service } from '../../../src/client/index.js';
import { type Installation, sizeFields } from '../installation.js';
import { CopyField, endpointOf, ErrorBox, Progress, sizeOf, StatusBadge } from '../parts.js';
import { href, navigate } from '../router.js';
import type { Session } from '../session.js';
import { Fork } from './fork.js';
import { Metrics } from './metrics.js';
import { Pooler, ReplicaSets, VpcAttachment } from './service-network.js';

const POLL_MS = 2000;
/** Statuses on the way to another: a new service's QUEUED and CONFIGURING too. */
const MOVING = new Set<string>([
  'QUEUED',
  'CONFIGURING',
  'PAUSING',
  'RESUMING',
  'DELETING',
  'UPGRADING',
  'OPTIMIZING',
]);
/** The file name the CA certificate downloads as, which the connection strings name. */
export const CA_FILE = 'basin-ca.crt';

/** What an action waits for: a status, or the service gone. */
interface Pending {
  label: string;
  until: Service['status'] | 'GONE';
}

export function ServicePage({
  session,
  id,
  installation,
}: {
  session: Session;
  id: string;
  installation: Installation | undefined;
}) {
  const { client, projectId } = session;
  const queries = useQueryClient();
  const path = { project_id: projectId, service_id: id };
  const [pending, setPending] = useState<Pending | null>(null);
  const service = useQuery({
    queryKey: ['service', projectId, id],
    queryFn: () =>
      client.GET('/v1/projects/{project_id}/services/{service_id}', { params: { path } }),
    refetchInterval: POLL_MS,
  });
  const svc = service.data;
  const gone = service.error instanceof BasinError && service.error.code === 'NOT_FOUND';
  useEffect(() => {
    if (!pending) return;
    if (pending.until === 'GONE' ? gone : svc?.status === pending.until) {
      setPending(null);
      if (pending.until === 'GONE') navigate({ page: 'services' });
    }
  }, [pending, gone, svc?.status]);

  /** Runs a call, then waits for `until`; the answer (a Service) shows at once. */
  const action = useMutation({
    mutationFn: async (a: { run: () => Promise<unknown>; pending: Pending }) => {
      const answer = await a.run();
      return { answer, pending: a.pending };
    },
    onSuccess: ({ answer, pending: p }) => {
      if (answer && typeof answer === 'object' && 'service_id' in answer) {
        queries.setQueryData(['service', projectId, id], answer);
      }
      setPending(p);
      queries.invalidateQueries({ queryKey: ['services', projectId] });
    },
  });
  const run = (label: string, until: Pending['until'], call: () => Promise<unknown>) =>
    action.mutate({ run: call, pending: { label, until } });

  if (service.isPending) return <p role="status">Loading…</p>;
  if (!svc) {
    return (
      <>
        <h1>Service {id}</h1>
        <ErrorBox error={service.error} />
        <a href={href({ page: 'services' })}>Back to services</a>
      </>
    );
  }
  const busy = action.isPending || pending !== null;
  const paused = svc.status === 'PAUSED';
  return (
    <>
      <div className="title-row">
        <h1>{svc.name}</h1>
        <a className="button secondary" href={href({ page: 'logs', id })}>
          Logs
        </a>
      </div>
      {pending ? (
        <Progress text={`${pending.label}: now ${svc.status}…`} />
      ) : (
        svc.status &&
        MOVING.has(svc.status) && <Progress text={`${svc.status}: the service is on its way…`} />
      )}
      <ErrorBox error={action.error} />

      <section aria-labelledby="overview">
        <h2 id="overview">Overview</h2>
        <dl className="facts">
          <dt>Status</dt>
          <dd>
            <StatusBadge status={svc.status} />
          </dd>
          <dt>ID</dt>
          <dd className="mono">{svc.service_id}</dd>
          <dt>Type</dt>
          <dd>{svc.service_type}</dd>
          <dt>Size</dt>
          <dd>{sizeOf(svc)}</dd>
          <dt>Region</dt>
          <dd>{svc.region_code}</dd>
          <dt>Endpoint</dt>
          <dd className="mono">{endpointOf(svc)}</dd>
          <dt>Pooler</dt>
          <dd className="mono">
            {svc.connection_pooler?.endpoint
              ? `${svc.connection_pooler.endpoint.host}:${svc.connection_pooler.endpoint.port}`
              : 'off'}
          </dd>
          <dt>HA replicas</dt>
          <dd>{svc.ha_replicas?.replica_count ?? 0}</dd>
          <dt>Environment</dt>
          <dd>{svc.metadata?.environment ?? '—'}</dd>
          <dt>Usage</dt>
          <dd>
            {svc.metrics
              ? `${svc.metrics.milli_cpu}m CPU, ${svc.metrics.memory_mb} MB memory, ${svc.metrics.storage_mb} MB storage`
              : '—'}
          </dd>
          {svc.forked_from && (
            <>
              <dt>Forked from</dt>
              <dd>
                <a href={href({ page: 'service', id: svc.forked_from.service_id })}>
                  {svc.forked_from.service_id}
                </a>
              </dd>
            </>
          )}
        </dl>
      </section>

      {svc.endpoint && (
        <section aria-labelledby="connect">
          <h2 id="connect">Connect</h2>
          <p>
            Download the CA certificate into the directory you run psql from, and use the password
            shown when the service was created (or set a new one below).
          </p>
          <CopyField id="psql-line" label="psql" value={psqlLine(svc)} />
          <CopyField id="uri" label="Connection URI" value={uri(svc)} />
          {installation?.driver === 'local' && (
            <p>
              <a className="button secondary" href="/console/ca.crt" download={CA_FILE}>
                Download CA certificate
              </a>
            </p>
          )}
        </section>
      )}

      <section aria-labelledby="actions">
        <h2 id="actions">Actions</h2>
        <div className="actions">
          {paused ? (
            <button
              type="button"
              disabled={busy}
              onClick={() =>
                run('Starting', 'READY', () =>
                  client.POST('/v1/projects/{project_id}/services/{service_id}/start', {
                    params: { path },
                  }),
                )
              }
            >
              Start
            </button>
          ) : (
            <button
              type="button"
              disabled={busy || svc.status !== 'READY'}
              onClick={() =>
                run('Stopping', 'PAUSED', () =>
                  client.POST('/v1/projects/{project_id}/services/{service_id}/stop', {
                    params: { path },
                  }),
                )
              }
            >
              Stop
            </button>
          )}
        </div>
        <Settings svc={svc} installation={installation} busy={busy} run={run} session={session} />
      </section>

      <section aria-labelledby="network">
        <h2 id="network">Pooler and VPC</h2>
        <div className="settings">
          <Pooler session={session} svc={svc} />
          <VpcAttachment session={session} svc={svc} />
        </div>
      </section>

      <ReplicaSets session={session} svc={svc} installation={installation} />

      <Metrics session={session} svc={svc} />

      <Fork session={session} svc={svc} installation={installation} />

      <DeleteService
        svc={svc}
        busy={busy}
        onDelete={() =>
          run('Deleting', 'GONE', () =>
            client.DELETE('/v1/projects/{project_id}/services/{service_id}', { params: { path } }),
          )
        }
      />
    </>
  );
}

export function psqlLine(svc: Service): string {
  const e = svc.endpoint as { host: string; port: number };
  return `psql "host=${e.host} port=${e.port} user=tsdbadmin dbname=tsdb sslmode=verify-full sslrootcert=${CA_FILE} channel_binding=require"`;
}

export function uri(svc: Service): string {
  const e = svc.endpoint as { host: string; port: number };
  return `postgres://tsdbadmin@${e.host}:${e.port}/tsdb?sslmode=verify-full&sslrootcert=${CA_FILE}&channel_binding=require`;
}

type Run = (label: string, until: Pending['until'], call: () => Promise<unknown>) => void;

/** Rename, resize, password, environment, HA replicas: one small form each. */
function Settings({
  svc,
  installation,
  busy,
  run,
  session,
}: {
  svc: Service;
  installation: Installation | undefined;
  busy: boolean;
  run: Run;
  session: Session;
}) {
  const { client, projectId } = session;
  const path = { project_id: projectId, service_id: svc.service_id ?? '' };
  const [name, setName] = useState(svc.name ?? '');
  const [size, setSize] = useState('');
  const [password, setPassword] = useState('');
  const [replicas, setReplicas] = useState(svc.ha_replicas?.replica_count ?? 0);
  const [saved, setSaved] = useState('');
  const [error, setError] = useState<unknown>(null);
  const call = (what: string, p: () => Promise<unknown>) => async (e: FormEvent) => {
    e.preventDefault();
    setError(null);
    setSaved('');
    try {
      await p();
      setSaved(what);
    } catch (err) {
      setError(err);
    }
  };
  const dedicated = (installation?.sizes ?? []).filter((s) => s !== 'shared');
  return (
    <div className="settings">
      <SmallForm
        title="Rename"
        onSubmit={call('Renamed.', () =>
          client.POST('/v1/projects/{project_id}/services/{service_id}/rename', {
            params: { path },
            body: { name },
          }),
        )}
      >
        <label htmlFor="new-name">New name</label>
        <input id="new-name" required value={name} onChange={(e) => setName(e.target.value)} />
        <button type="submit">Rename</button>
      </SmallForm>
      <SmallForm
        title="Resize"
        onSubmit={(e) => {
          e.preventDefault();
          if (!size) return;
          run('Resizing', 'READY', () =>
            client.POST('/v1/projects/{project_id}/services/{service_id}/resize', {
              params: { path },
              body: sizeFields(size),
            }),
          );
        }}
      >
        <label htmlFor="new-size">New size</label>
        <select id="new-size" required value={size} onChange={(e) => setSize(e.target.value)}>
          <option value="">Choose a size</option>
          {dedicated.map((s) => (
            <option key={s}>{s}</option>
          ))}
        </select>
        <button type="submit" disabled={busy}>
          Resize
        </button>
      </SmallForm>
      <SmallForm
        title="Password"
        onSubmit={call('Password changed.', () =>
          client.POST('/v1/projects/{project_id}/services/{service_id}/updatePassword', {
            params: { path },
            body: { password },
          }),
        )}
      >
        <label htmlFor="new-password">New password for tsdbadmin</label>
        <input
          id="new-password"
          type="password"
          autoComplete="new-password"
          minLength={8}
          required
          value={password}
          onChange={(e) => setPassword(e.target.value)}
        />
        <button type="submit">Set password</button>
      </SmallForm>
      <SmallForm title="Environment" onSubmit={(e) => e.preventDefault()}>
        <span className="label">Tag the service</span>
        <div className="actions">
          {(['DEV', 'PROD'] as const).map((env) => (
            <button
              key={env}
              type="button"
              onClick={call(`Environment set to ${env}.`, () =>
                client.POST('/v1/projects/{project_id}/services/{service_id}/setEnvironment', {
                  params: { path },
                  body: { environment: env },
                }),
              )}
            >
              {env}
            </button>
          ))}
        </div>
      </SmallForm>
      <SmallForm
        title="HA replicas"
        onSubmit={(e) => {
          e.preventDefault();
          run('Changing HA replicas', 'READY', () =>
            client.POST('/v1/projects/{project_id}/services/{service_id}/setHA', {
              params: { path },
              body: { replica_count: replicas },
            }),
          );
        }}
      >
        <label htmlFor="ha-replicas">Replicas</label>
        <input
          id="ha-replicas"
          type="number"
          min={0}
          value={replicas}
          onChange={(e) => setReplicas(Number(e.target.value))}
        />
        <button type="submit" disabled={busy}>
          Set replicas
        </button>
      </SmallForm>
      <p role="status" className="hint">
        {saved}
      </p>
      <ErrorBox error={error} />
    </div>
  );
}

function SmallForm({
  title,
  onSubmit,
  children,
}: {
  title: string;
  onSubmit: (e: FormEvent) => void;
  children: ReactNode;
}) {
  return (
    <form className="small-form" onSubmit={onSubmit} aria-label={title}>
      <h3>{title}</h3>
      {children}
    </form>
  );
}

/** Delete asks for the service's name first. */
function DeleteService({
  svc,
  busy,
  onDelete,
}: {
  svc: Service;
  busy: boolean;
  onDelete: () => void;
}) {
  const [open, setOpen] = useState(false);
  const [typed, setTyped] = useState('');
  return (
    <section aria-labelledby="danger" className="danger">
      <h2 id="danger">Delete</h2>
      {!open ? (
        <button
          type="button"
          className="danger-button"
          disabled={busy}
          onClick={() => setOpen(true)}
        >
          Delete service
        </button>
      ) : (
        <form
          className="form"
          onSubmit={(e) => {
            e.preventDefault();
            if (typed === svc.name) onDelete();
          }}
        >
          <p>
            This deletes <strong>{svc.name}</strong> and its data. Type its name to confirm.
          </p>
          <label htmlFor="confirm-name">Service name</label>
          <input
            id="confirm-name"
            autoFocus
            value={typed}
            onChange={(e) => setTyped(e.target.value)}
          />
          <div className="actions">
            <button type="submit" className="danger-button" disabled={busy || typed !== svc.name}>
              Delete {svc.name}
            </button>
            <button type="button" className="secondary" onClick={() => setOpen(false)}>
              Cancel
            </button>
          </div>
        </form>
      )}
    </section>
  );
}
