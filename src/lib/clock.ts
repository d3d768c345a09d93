/** Milliseconds since the epoch. Injected everywhere time matters, so tests can control it. */
export type Clock = () => number;

export const systemClock: Clock = () => Date.now();

export const iso = (ms: number): string => new Date(ms).toISOString();
