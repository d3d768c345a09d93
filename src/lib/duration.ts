/** How a span of time reads in a log entry: `800 ms`, `8 s`, `5 min`. */
export function duration(ms: number): string {
  if (ms < 1_000) return `${ms} ms`;
  if (ms < 120_000) return `${Math.round(ms / 1_000)} s`;
  return `${Math.round(ms / 60_000)} min`;
}
