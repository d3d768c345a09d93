// The installation's catalogue (sizes, regions, the recovery window), which
// the API does not list: Basin serves it beside the console
// (src/api/console.ts), the same for every project.

export interface Installation {
  regions: string[];
  defaultRegion: string;
  /** `shared` or `<cpu_millis>m/<memory_gbs>GB`. */
  sizes: string[];
  pitrWindowMs: number;
  driver: string;
}

export async function fetchInstallation(): Promise<Installation> {
  const res = await fetch('/console/installation.json', { credentials: 'omit' });
  if (!res.ok) throw new Error(`The installation's catalogue answered ${res.status}.`);
  return (await res.json()) as Installation;
}

/** `1000m/4GB` → the create body's fields; `shared` → both "shared". */
export function sizeFields(size: string): { cpu_millis: string; memory_gbs: string } {
  if (size === 'shared') return { cpu_millis: 'shared', memory_gbs: 'shared' };
  const m = /^(\d+)m\/(\d+)GB$/.exec(size);
  if (!m) throw new Error(`Unexpected size ${size}.`);
  return { cpu_millis: m[1] as string, memory_gbs: m[2] as string };
}
