// A service's logs, newest first: severity and search filters, a time
// range, older pages by the API's cursor, and a follow mode that polls the
// newest page.
import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import { ErrorBox } from '../parts.js';
import { href } from '../router.js';
import type { Session } from '../session.js';

const SEVERITIES = ['DEBUG', 'INFO', 'NOTICE', 'LOG', 'WARNING', 'ERROR', 'FATAL', 'PANIC'];
const FOLLOW_MS = 2000;

interface Filters {
  severity: string;
  search: string;
  since: string;
  until: string;
}

export function Logs({ session, id }: { session: Session; id: string }) {
  const { client, projectId } = session;
  const [draft, setDraft] = useState<Filters>({ severity: '', search: '', since: '', until: '' });
  const [filters, setFilters] = useState<Filters>(draft);
  // The cursors of the pages before this one: Newer goes back one.
  const [cursors, setCursors] = useState<(string | undefined)[]>([undefined]);
  const [follow, setFollow] = useState(false);
  const cursor = cursors[cursors.length - 1];
  const logs = useQuery({
    queryKey: ['logs', projectId, id, filters, cursor],
    queryFn: () =>
      client.GET('/v1/projects/{project_id}/services/{service_id}/logs', {
        params: {
          path: { project_id: projectId, service_id: id },
          query: {
            ...(cursor ? { cursor } : {}),
            ...(filters.severity ? { severities: filters.severity } : {}),
            ...(filters.search.trim() ? { search: filters.search.trim() } : {}),
            ...(filters.since ? { since: new Date(filters.since).toISOString() } : {}),
            ...(filters.until ? { until: new Date(filters.until).toISOString() } : {}),
          },
        },
      }),
    placeholderData: keepPreviousData,
    refetchInterval: follow && cursor === undefined ? FOLLOW_MS : false,
  });
  const apply = (e: FormEvent) => {
    e.preventDefault();
    setFilters(draft);
    setCursors([undefined]);
  };
  const entries = logs.data?.entries ?? [];
  const next = logs.data?.lastCursor;
  const set = (k: keyof Filters) => (e: { target: { value: string } }) =>
    setDraft({ ...draft, [k]: e.target.value });

  return (
    <>
      <div className="title-row">
        <h1>Logs</h1>
        <a className="button secondary" href={href({ page: 'service', id })}>
          Back to the service
        </a>
      </div>
      <form className="filters" onSubmit={apply} aria-label="Log filters">
        <div>
          <label htmlFor="severity">Severity</label>
          <select id="severity" value={draft.severity} onChange={set('severity')}>
            <option value="">Any</option>
            {SEVERITIES.map((s) => (
              <option key={s}>{s}</option>
            ))}
          </select>
        </div>
        <div>
          <label htmlFor="search">Search</label>
          <input id="search" type="search" value={draft.search} onChange={set('search')} />
        </div>
        <div>
          <label htmlFor="since">From</label>
          <input id="since" type="datetime-local" value={draft.since} onChange={set('since')} />
        </div>
        <div>
          <label htmlFor="until">To</label>
          <input id="until" type="datetime-local" value={draft.until} onChange={set('until')} />
        </div>
        <button type="submit">Apply</button>
        <label className="check">
          <input
            type="checkbox"
            checked={follow}
            onChange={(e) => {
              setFollow(e.target.checked);
              if (e.target.checked) setCursors([undefined]);
            }}
          />
          Follow
        </label>
      </form>
      <ErrorBox error={logs.error} />
      <div className="table-wrap" role="region" aria-label="Log entries" tabIndex={0}>
        <table className="logs" aria-busy={logs.isPlaceholderData}>
          <caption className="visually-hidden">Log entries, newest first</caption>
          <thead>
            <tr>
              <th scope="col">Time</th>
              <th scope="col">Severity</th>
              <th scope="col">Source</th>
              <th scope="col">Message</th>
            </tr>
          </thead>
          <tbody>
            {entries.map((e, i) => (
              <tr key={`${e.timestamp}-${i}`}>
                <td className="mono nowrap">{e.timestamp}</td>
                <td>{e.severity}</td>
                <td>{e.source ?? ''}</td>
                <td className="message">{e.message}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {logs.isPending && <p role="status">Loading logs…</p>}
      {!logs.isPending && entries.length === 0 && <p>No entries on this page.</p>}
      <nav className="pager" aria-label="Pages of log entries">
        <button
          type="button"
          disabled={cursors.length <= 1}
          onClick={() => setCursors(cursors.slice(0, -1))}
        >
          Newer
        </button>
        <button
          type="button"
          disabled={!next}
          onClick={() => {
            setFollow(false);
            setCursors([...cursors, next]);
          }}
        >
          Older
        </button>
      </nav>
    </>
  );
}
