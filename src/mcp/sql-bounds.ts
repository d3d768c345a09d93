// The SQL tool's bounds, as pure logic: how many rows an answer may carry and
// how long a statement may run, with the caller's asks clamped to ceilings
// (docs/decisions.md, "The MCP server's SQL tool").

export const ROW_CAP = { default: 100, max: 1000 } as const;
export const TIMEOUT_MS = { default: 5_000, max: 60_000 } as const;

export interface SqlBounds {
  maxRows: number;
  timeoutMs: number;
  readOnly: boolean;
}

/** The bounds of one call: asks clamped to [1, ceiling]; read-only unless the caller asks and the server allows writes. */
export function boundsOf(
  ask: {
    max_rows?: number | undefined;
    timeout_ms?: number | undefined;
    read_only?: boolean | undefined;
  },
  serverReadOnly: boolean,
): SqlBounds {
  return {
    maxRows: clamp(ask.max_rows ?? ROW_CAP.default, ROW_CAP.max),
    timeoutMs: clamp(ask.timeout_ms ?? TIMEOUT_MS.default, TIMEOUT_MS.max),
    readOnly: serverReadOnly || ask.read_only !== false,
  };
}

function clamp(n: number, max: number): number {
  return Math.min(Math.max(1, Math.floor(n)), max);
}

/** Rows cut to the cap, saying whether any were left out. */
export function capRows<T>(rows: readonly T[], maxRows: number): { rows: T[]; truncated: boolean } {
  return { rows: rows.slice(0, maxRows), truncated: rows.length > maxRows };
}
