/**
 * Left-aligned columns separated by two spaces, a header first; the last
 * column is not padded, so `awk '{print $1}'` and `cut` work on the output.
 */
export function table(header: string[], rows: string[][]): string {
  const all = [header, ...rows];
  const widths = header.map((_, i) => Math.max(...all.map((r) => (r[i] ?? '').length)));
  return all
    .map((r) =>
      r.map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i] ?? 0))).join('  '),
    )
    .join('\n')
    .concat('\n');
}

/** One record, a field a line (`NAME  value`), `-` for what it lacks. */
export function fieldLines(
  rows: readonly (readonly [string, string | number | undefined])[],
): string {
  const width = Math.max(...rows.map(([k]) => k.length));
  return rows.map(([k, v]) => `${k.padEnd(width)}  ${v ?? '-'}\n`).join('');
}
