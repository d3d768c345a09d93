// The API requests' histogram, counted on the hot path of every request.
//
// prom-client's Histogram hashes its label set on every observe (~1 µs
// here), which is 8 % of the CPU a poll of a service takes through the
// polling fast lane (bench/README.md, service-get: 13 µs). This one finds
// its series by the three values (maps, no key built) and adds to numbers
// (~0.06 µs), and builds prom-client's export shape only when scraped; the text it
// gives is the same histogram (cumulative `_bucket{le}`, `_sum`, `_count`).
// It is registered in a prom-client Registry like any metric (the Registry
// reads `name`, `help`, `type` and `get()`).

type RequestLabels = 'method' | 'route' | 'status';

/** One line of the export, as prom-client's Registry reads it. */
interface ExportedValue {
  metricName: string;
  labels: Record<string, string | number>;
  value: number;
}

/** What prom-client's Registry reads of a metric's get(). */
interface Exported {
  name: string;
  help: string;
  type: 'histogram';
  values: ExportedValue[];
  aggregator: 'sum';
}

interface Series {
  labels: Record<RequestLabels, string>;
  /** Observations per bucket, not cumulative: counts[i] fell at or below buckets[i] and above buckets[i-1]. */
  counts: Float64Array;
  sum: number;
  count: number;
}

export class RequestHistogram {
  readonly type = 'histogram';
  /** By route, then status, then method: lookups of values already at hand, no key to build. */
  private readonly series = new Map<string, Map<number, Map<string, Series>>>();

  constructor(
    readonly name: string,
    readonly help: string,
    private readonly buckets: readonly number[],
  ) {}

  observe(method: string, route: string, status: number, seconds: number): void {
    let byStatus = this.series.get(route);
    if (!byStatus) this.series.set(route, (byStatus = new Map()));
    let byMethod = byStatus.get(status);
    if (!byMethod) byStatus.set(status, (byMethod = new Map()));
    let s = byMethod.get(method);
    if (!s) {
      s = {
        labels: { method, route, status: String(status) },
        counts: new Float64Array(this.buckets.length),
        sum: 0,
        count: 0,
      };
      byMethod.set(method, s);
    }
    const b = this.buckets;
    let i = 0;
    while (i < b.length && seconds > (b[i] as number)) i++;
    if (i < b.length) (s.counts[i] as number)++;
    s.sum += seconds;
    s.count++;
  }

  /** What prom-client's Registry formats: the buckets cumulative, +Inf, sum and count per series. */
  async get(): Promise<Exported> {
    const values: ExportedValue[] = [];
    const all = [...this.series.values()].flatMap((b) =>
      [...b.values()].flatMap((m) => [...m.values()]),
    );
    for (const s of all) {
      let cumulative = 0;
      this.buckets.forEach((le, i) => {
        cumulative += s.counts[i] as number;
        values.push({
          metricName: `${this.name}_bucket`,
          labels: { le, ...s.labels },
          value: cumulative,
        });
      });
      values.push({
        metricName: `${this.name}_bucket`,
        labels: { le: '+Inf', ...s.labels },
        value: s.count,
      });
      values.push({ metricName: `${this.name}_sum`, labels: s.labels, value: s.sum });
      values.push({ metricName: `${this.name}_count`, labels: s.labels, value: s.count });
    }
    return { name: this.name, help: this.help, type: 'histogram', values, aggregator: 'sum' };
  }

  reset(): void {
    this.series.clear();
  }
}
