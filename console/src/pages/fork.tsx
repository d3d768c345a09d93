// Fork: NOW (a copy of the running service), LAST_SNAPSHOT (its last
// backup) or PITR (a moment within the recovery window, picked in local time).
import { useMutation } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import type { Service, components } from '../../../src/client/index.js';
import type { Installation } from '../installation.js';
import { CopyField, ErrorBox } from '../parts.js';
import { href } from '../router.js';
import type { Session } from '../session.js';

type Strategy = components['schemas']['ServiceForkInput']['fork_strategy'];

/** A Date as the value of an <input type="datetime-local"> (local time, to the second). */
function local(d: Date): string {
  const p = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

export function Fork({
  session,
  svc,
  installation,
}: {
  session: Session;
  svc: Service;
  installation: Installation | undefined;
}) {
  const { client, projectId } = session;
  const [strategy, setStrategy] = useState<Strategy>('NOW');
  const [name, setName] = useState('');
  const [at, setAt] = useState('');
  const now = new Date();
  const windowStart = new Date(
    Math.max(
      svc.created ? Date.parse(svc.created) : 0,
      now.getTime() - (installation?.pitrWindowMs ?? 0),
    ),
  );
  const fork = useMutation({
    mutationFn: () =>
      client.POST('/v1/projects/{project_id}/services/{service_id}/forkService', {
        params: { path: { project_id: projectId, service_id: svc.service_id ?? '' } },
        body: {
          fork_strategy: strategy,
          ...(name ? { name } : {}),
          ...(strategy === 'PITR' ? { target_time: new Date(at).toISOString() } : {}),
        },
      }),
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    fork.mutate();
  };
  const forked = fork.data;
  return (
    <section aria-labelledby="fork">
      <h2 id="fork">Fork</h2>
      {forked ? (
        <>
          <p>
            Forking into{' '}
            <a href={href({ page: 'service', id: forked.service_id ?? '' })}>{forked.name}</a> (
            {forked.service_id}). Its password is shown only now.
          </p>
          <CopyField
            id="fork-password"
            label="Fork's initial password"
            value={forked.initial_password ?? ''}
          />
        </>
      ) : (
        <form className="form" onSubmit={submit}>
          <fieldset>
            <legend>From</legend>
            {(
              [
                ['NOW', 'Now (a copy of the running service)'],
                ['LAST_SNAPSHOT', 'The last backup'],
                ['PITR', 'A point in time'],
              ] as const
            ).map(([value, label]) => (
              <label className="check" key={value}>
                <input
                  type="radio"
                  name="fork-strategy"
                  value={value}
                  checked={strategy === value}
                  onChange={() => setStrategy(value)}
                />
                {label}
              </label>
            ))}
          </fieldset>
          {strategy === 'PITR' && (
            <>
              <label htmlFor="fork-time">Point in time (your local time)</label>
              <input
                id="fork-time"
                type="datetime-local"
                step={1}
                required
                min={local(windowStart)}
                max={local(now)}
                value={at}
                onChange={(e) => setAt(e.target.value)}
              />
              <span className="hint">
                Between {windowStart.toLocaleString()} and now (the recovery window).
              </span>
            </>
          )}
          <label htmlFor="fork-name">Name of the fork (optional)</label>
          <input id="fork-name" value={name} onChange={(e) => setName(e.target.value)} />
          <button type="submit" disabled={fork.isPending}>
            Fork service
          </button>
        </form>
      )}
      <ErrorBox error={fork.error} />
    </section>
  );
}
