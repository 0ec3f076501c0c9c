/** Durations ("500ms", "2s", "5m", "1h") and byte sizes ("64MiB", "512KiB", 1048576). */

const durationUnits: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const durationPattern = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/;

/** Milliseconds for a duration written with a unit, or undefined when it is not one. */
export function parseDuration(text: string): number | undefined {
  const match = durationPattern.exec(text.trim());
  if (!match) return undefined;
  const ms = Number(match[1]) * durationUnits[match[2]!]!;
  return Number.isInteger(ms) ? ms : undefined;
}

/**
 * A duration as the spec writes ranges: whole days in days, whole seconds in seconds, the rest in
 * milliseconds (1 → "1ms", 30000 → "30s", 600000 → "600s", 2592000000 → "30d").
 */
export function formatDuration(ms: number): string {
  if (ms >= durationUnits.d! && ms % durationUnits.d! === 0) return `${ms / durationUnits.d!}d`;
  if (ms >= durationUnits.s! && ms % durationUnits.s! === 0) return `${ms / durationUnits.s!}s`;
  return `${ms}ms`;
}

const byteUnits: Record<string, number> = {
  B: 1,
  KB: 1e3,
  MB: 1e6,
  GB: 1e9,
  TB: 1e12,
  KiB: 2 ** 10,
  MiB: 2 ** 20,
  GiB: 2 ** 30,
  TiB: 2 ** 40,
};
const bytesPattern = /^(\d+(?:\.\d+)?)\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)?$/;

/** Bytes for "64MiB", "1.5GB" or a plain count, or undefined when it is none of those. */
export function parseBytes(value: string | number): number | undefined {
  if (typeof value === 'number') return Number.isSafeInteger(value) && value >= 0 ? value : undefined;
  const match = bytesPattern.exec(value.trim());
  if (!match) return undefined;
  const bytes = Number(match[1]) * byteUnits[match[2] ?? 'B']!;
  return Number.isSafeInteger(bytes) ? bytes : undefined;
}

/** The shortest exact binary spelling: 67108864 → "64MiB". */
export function formatBytes(bytes: number): string {
  for (const unit of ['TiB', 'GiB', 'MiB', 'KiB'] as const) {
    const size = byteUnits[unit]!;
    if (bytes >= size && bytes % size === 0) return `${bytes / size}${unit}`;
  }
  return `${bytes}B`;
}

/** Bytes as GiB with two decimals (`4.80`), as the engines' own messages give sizes. */
export const gibibytes = (bytes: number): string => (bytes / 2 ** 30).toFixed(2);
