// The project's services, polled: statuses change by themselves. Paged in
// the browser (the API answers the whole list), so 1,000 rows stay light.
import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { endpointOf, ErrorBox, sizeOf, StatusBadge } from '../parts.js';
import { href } from '../router.js';
import type { Session } from '../session.js';

const PAGE = 50;
export const POLL_MS = 3000;

export function Services({ session }: { session: Session }) {
  const { client, projectId } = session;
  const [filter, setFilter] = useState('');
  const [page, setPage] = useState(0);
  const services = useQuery({
    queryKey: ['services', projectId],
    queryFn: () =>
      client.GET('/v1/projects/{project_id}/services', {
        params: { path: { project_id: projectId } },
      }),
    // Every 3 s, and less often for long lists: the whole list is one answer.
    refetchInterval: (q) => Math.max(POLL_MS, (q.state.data?.length ?? 0) * 10),
  });
  const needle = filter.trim().toLowerCase();
  const all = (services.data ?? []).filter(
    (s) =>
      !needle ||
      (s.name ?? '').toLowerCase().includes(needle) ||
      (s.service_id ?? '').includes(needle),
  );
  const pages = Math.max(1, Math.ceil(all.length / PAGE));
  const current = Math.min(page, pages - 1);
  const shown = all.slice(current * PAGE, (current + 1) * PAGE);

  return (
    <>
      <div className="title-row">
        <h1>Services</h1>
        <a className="button" href={href({ page: 'create' })}>
          Create service
        </a>
      </div>
      <ErrorBox error={services.error} />
      <div className="toolbar">
        <label htmlFor="filter">Filter by name or id</label>
        <input
          id="filter"
          type="search"
          value={filter}
          onChange={(e) => {
            setFilter(e.target.value);
            setPage(0);
          }}
        />
      </div>
      {services.isPending ? (
        <p role="status">Loading services…</p>
      ) : (
        <>
          <div className="table-wrap" role="region" aria-label="Services" tabIndex={0}>
            <table>
              <caption className="visually-hidden">
                Services of the project, page {current + 1} of {pages}
              </caption>
              <thead>
                <tr>
                  <th scope="col">Name</th>
                  <th scope="col">ID</th>
                  <th scope="col">Status</th>
                  <th scope="col">Type</th>
                  <th scope="col">Size</th>
                  <th scope="col">Region</th>
                  <th scope="col">Endpoint</th>
                </tr>
              </thead>
              <tbody>
                {shown.map((s) => (
                  <tr key={s.service_id}>
                    <td>
                      <a href={href({ page: 'service', id: s.service_id ?? '' })}>{s.name}</a>
                    </td>
                    <td className="mono">{s.service_id}</td>
                    <td>
                      <StatusBadge status={s.status} />
                    </td>
                    <td>{s.service_type}</td>
                    <td>{sizeOf(s)}</td>
                    <td>{s.region_code}</td>
                    <td className="mono">{endpointOf(s)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          {all.length === 0 && <p>No services{needle ? ' match' : ' yet'}.</p>}
          <nav className="pager" aria-label="Pages of services">
            <button type="button" disabled={current === 0} onClick={() => setPage(current - 1)}>
              Previous
            </button>
            <span>
              Page {current + 1} of {pages} ({all.length} services)
            </span>
            <button
              type="button"
              disabled={current >= pages - 1}
              onClick={() => setPage(current + 1)}
            >
              Next
            </button>
          </nav>
        </>
      )}
    </>
  );
}
