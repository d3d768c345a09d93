// What the benchmarks read from the environment of the person running them.

/** A whole number from the environment, at least `min`, or `fallback` when unset. */
export function envInt(name: string, fallback: number, min = 1): number {
  const v = process.env[name];
  if (v === undefined || v === '') return fallback;
  const n = Number(v);
  if (!Number.isInteger(n) || n < min) throw new Error(`${name} must be a whole number >= ${min}`);
  return n;
}

/** The environment without PG* settings of the person running the bench. */
export function pgEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('PG')));
}
