/** How a listing shows a quantity to a person: rounded, in the largest unit that reads well. */

const BINARY_UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'] as const;

/** `25276510208` → `23.5GiB`: one decimal, none when whole (a card's `8GiB` stays as written). */
export function readableBytes(bytes: number): string {
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < BINARY_UNITS.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${Number(value.toFixed(1))}${BINARY_UNITS[unit]}`;
}

/** How long ago `at` was, as `12s ago`, `5m ago`, `3h ago`, `2d ago`. */
export function readableAge(at: string | Date, nowMs = Date.now()): string {
  const seconds = Math.max(0, Math.floor((nowMs - new Date(at).getTime()) / 1000));
  if (seconds < 60) return `${seconds}s ago`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m ago`;
  if (seconds < 86_400) return `${Math.floor(seconds / 3600)}h ago`;
  return `${Math.floor(seconds / 86_400)}d ago`;
}
