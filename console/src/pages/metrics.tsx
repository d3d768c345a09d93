// Usage charts, from the metrics series API (POST …/metrics/series): CPU,
// memory, storage, connections and committed transactions a second, over
// the last hour, day or week, refreshed every 30 s. A series with no
// sample in the window (a service just made, or one Basin restarted since:
// samples live in Basin's memory) says so instead of drawing.
import { useQuery } from '@tanstack/react-query';
import { useEffect, useRef, useState } from 'react';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import type { components, Service } from '../../../src/client/index.js';
import { ErrorBox } from '../parts.js';
import type { Session } from '../session.js';

type Fn = NonNullable<components['schemas']['MetricsSeriesRequest']['fn']>;
type Points = { t: number[]; v: (number | null)[] };

const WINDOWS = [
  { key: 'hour', label: 'Last hour', seconds: 3600, bucket: 60 },
  { key: 'day', label: 'Last day', seconds: 86_400, bucket: 600 },
  { key: 'week', label: 'Last week', seconds: 7 * 86_400, bucket: 3600 },
] as const;
type Window = (typeof WINDOWS)[number];

const SERIES: { name: string; title: string; unit: string; fn?: Fn; scale?: number; stroke: string }[] =
  [
    { name: 'timescale_cloud_system_cpu_usage_millicores', title: 'CPU', unit: 'millicores', stroke: '#1d4ed8' },
    { name: 'timescale_cloud_system_memory_usage_bytes', title: 'Memory', unit: 'MB', scale: 1 / 1048576, stroke: '#116329' },
    { name: 'timescale_cloud_system_disk_usage_bytes', title: 'Storage', unit: 'MB', scale: 1 / 1048576, stroke: '#8250df' },
    { name: 'timescale_cloud_database_num_connections', title: 'Connections', unit: 'connections', stroke: '#9a6700' },
    { name: 'basin_database_xact_commit_total', title: 'Transactions', unit: 'commits/s', fn: 'RATE', stroke: '#cf222e' },
  ]; // prettier-ignore

export function Metrics({ session, svc }: { session: Session; svc: Service }) {
  const [window, setWindow] = useState<Window>(WINDOWS[0]);
  return (
    <section aria-labelledby="metrics">
      <h2 id="metrics">Metrics</h2>
      <div role="group" aria-label="Time range" className="actions">
        {WINDOWS.map((w) => (
          <button
            key={w.key}
            type="button"
            aria-pressed={w.key === window.key}
            onClick={() => setWindow(w)}
          >
            {w.label}
          </button>
        ))}
      </div>
      <div className="charts">
        {SERIES.map((s) => (
          <Chart key={s.name} session={session} svc={svc} series={s} window={window} />
        ))}
      </div>
    </section>
  );
}

function Chart({
  session,
  svc,
  series,
  window,
}: {
  session: Session;
  svc: Service;
  series: (typeof SERIES)[number];
  window: Window;
}) {
  const { client, projectId } = session;
  const data = useQuery({
    queryKey: ['series', projectId, svc.service_id, series.name, window.key],
    refetchInterval: 30_000,
    queryFn: async (): Promise<Points> => {
      const now = Date.now();
      const answer = await client.POST(
        '/v1/projects/{project_id}/services/{service_id}/metrics/series',
        {
          params: { path: { project_id: projectId, service_id: svc.service_id ?? '' } },
          body: {
            name: series.name,
            from: new Date(now - window.seconds * 1000).toISOString(),
            to: new Date(now).toISOString(),
            bucket_seconds: window.bucket,
            ...(series.fn ? { fn: series.fn } : {}),
            // The primary's: a replica's would be another line.
            filters: [{ key: 'role', value: 'primary' }],
          },
        },
      );
      const points = answer[0]?.data ?? [];
      const scale = series.scale ?? 1;
      return {
        t: points.map((p) => Date.parse(p.time) / 1000),
        v: points.map((p) => (p.value === null ? null : Math.round(p.value * scale * 10) / 10)),
      };
    },
  });
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    plot.current = new uPlot(
      {
        width: Math.max(200, el.clientWidth),
        height: 140,
        legend: { show: false },
        scales: { x: { time: true } },
        cursor: { show: false },
        series: [{}, { label: series.title, stroke: series.stroke, width: 2, spanGaps: false }],
        axes: [{}, { size: 60 }],
      },
      [[], []],
      el,
    );
    return () => {
      plot.current?.destroy();
      plot.current = null;
    };
  }, [series]);
  useEffect(() => {
    if (data.data) plot.current?.setData([data.data.t, data.data.v]);
  }, [data.data]);
  const last = data.data?.v.findLast((v) => v !== null);
  const label =
    last === undefined || last === null
      ? `${series.title}: no sample in this range yet`
      : `${series.title}: ${last} ${series.unit} (latest)`;
  return (
    <figure className="chart">
      <figcaption>{label}</figcaption>
      <div
        ref={box}
        role="img"
        aria-label={`${series.title} over the ${window.label.toLowerCase()}, ${series.unit}`}
      />
      <ErrorBox error={data.error} />
    </figure>
  );
}
