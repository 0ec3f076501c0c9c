/**
 * The one table layout every `capyctl` listing prints, as the spec's `capyctl list deployments`:
 * upper-case headers, each column as wide as its longest cell and three spaces more, the last one
 * not padded.
 */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: readonly string[]) =>
    cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]! + 3))).join('');
  return [header, ...rows].map(line).join('\n') + '\n';
}
