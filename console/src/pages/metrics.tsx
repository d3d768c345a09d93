// Usage charts. Basin has no metrics series API yet: the page samples the
// service's current metrics (metrics.milli_cpu, memory_mb, storage_mb) at
// each poll while it is open, and draws the last hour of those samples. When
// a series API exists, the samples come from it instead.
import { useEffect, useRef, useState } from 'react';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import type { Service } from '../../../src/client/index.js';

const HOUR_S = 3600;
type Sample = { t: number; cpu: number; memory: number; storage: number };

const SERIES = [
  { key: 'cpu', title: 'CPU', unit: 'millicores', stroke: '#1d4ed8' },
  { key: 'memory', title: 'Memory', unit: 'MB', stroke: '#116329' },
  { key: 'storage', title: 'Storage', unit: 'MB', stroke: '#8250df' },
] as const;

export function Metrics({ svc }: { svc: Service }) {
  const [samples, setSamples] = useState<Sample[]>([]);
  const m = svc.metrics;
  useEffect(() => {
    if (!m) return;
    const t = Date.now() / 1000;
    setSamples((old) =>
      [...old, { t, cpu: m.milli_cpu, memory: m.memory_mb, storage: m.storage_mb }].filter(
        (s) => s.t > t - HOUR_S,
      ),
    );
  }, [m]);
  return (
    <section aria-labelledby="metrics">
      <h2 id="metrics">Metrics</h2>
      <p className="hint">
        Sampled from the service's current usage while this page is open (the last hour of it);
        connections and transactions are not measured yet.
      </p>
      <div className="charts">
        {SERIES.map((s) => (
          <Chart key={s.key} samples={samples} series={s} />
        ))}
      </div>
    </section>
  );
}

function Chart({ samples, series }: { samples: Sample[]; series: (typeof SERIES)[number] }) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const width = Math.max(200, el.clientWidth);
    plot.current = new uPlot(
      {
        width,
        height: 140,
        legend: { show: false },
        // Always the last hour, however few samples there are yet.
        scales: {
          x: {
            time: true,
            range: () => {
              const now = Date.now() / 1000;
              return [now - HOUR_S, now];
            },
          },
        },
        cursor: { show: false },
        series: [{}, { label: series.title, stroke: series.stroke, width: 2 }],
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
    plot.current?.setData([samples.map((s) => s.t), samples.map((s) => s[series.key])]);
  }, [samples, series]);
  const last = samples.at(-1);
  const label = `${series.title}: ${last ? `${last[series.key]} ${series.unit} now` : 'no sample yet'}`;
  return (
    <figure className="chart">
      <figcaption>{label}</figcaption>
      <div ref={box} role="img" aria-label={`${series.title} over the last hour, ${series.unit}`} />
    </figure>
  );
}
