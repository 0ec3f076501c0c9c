/**
 * Field builders that carry the spec's ranges. Each refuses a bad value with the value as written
 * and the allowed range, so the loader only has to put the path in front.
 */
import { z } from 'zod';
import { formatBytes, formatDuration, parseBytes, parseDuration } from './units.js';

export const show = (value: unknown): string => (typeof value === 'string' ? value : JSON.stringify(value));

interface Kind {
  /** The field's kind as its metadata names it (see `rangeOf`). */
  unit: Range['unit'];
  parse: (value: unknown) => number | undefined;
  what: string;
  format: (n: number) => string;
}

const durations: Kind = {
  unit: 'duration',
  parse: (v) => (typeof v === 'string' ? parseDuration(v) : undefined),
  what: 'a duration with a unit, such as 500ms, 2s or 5m',
  format: formatDuration,
};
const wholeNumbers: Kind = {
  unit: 'count',
  parse: (v) => (typeof v === 'number' && Number.isInteger(v) ? v : undefined),
  what: 'a whole number',
  format: String,
};
const sizes: Kind = {
  unit: 'bytes',
  parse: (v) => (typeof v === 'string' || typeof v === 'number' ? parseBytes(v) : undefined),
  what: 'a size such as 64MiB, 1GB or a number of bytes',
  format: formatBytes,
};

function checkRange(kind: Kind, min: number, max: number, value: unknown, ctx: z.RefinementCtx): number {
  const n = kind.parse(value);
  if (n === undefined) {
    // Left out, a field without a default (the bounds of a range) is missing, not malformed.
    ctx.addIssue({
      code: 'custom',
      message: value === undefined ? 'is required' : `${show(value)} is not ${kind.what}`,
    });
    return z.NEVER;
  }
  if (n < min || n > max) {
    ctx.addIssue({
      code: 'custom',
      message: `${show(value)} is out of range: allowed ${kind.format(min)} to ${kind.format(max)}`,
    });
    return z.NEVER;
  }
  return n;
}

/**
 * What a ranged field accepts, kept on its schema: the field reads any value and refuses it in a
 * transform, which says nothing of what it takes to someone walking the schema (a test that writes
 * a valid document per field).
 */
export interface Range {
  unit: 'duration' | 'count' | 'bytes';
  min: number;
  max: number;
  /** A timer: also `off`. */
  off?: true;
}
const ranges = z.registry<Range>();

/** The range a field was built with, or undefined for a field that is not ranged. */
export const rangeOf = (schema: z.ZodType): Range | undefined => ranges.get(schema);

const ranged = (kind: Kind, min: number, max: number) =>
  z
    .unknown()
    .transform((value, ctx) => checkRange(kind, min, max, value, ctx))
    .register(ranges, { unit: kind.unit, min, max });

/** A duration with a unit ("500ms", "2s", "5m"), read as milliseconds. */
export const durationMs = (min: number, max: number) => ranged(durations, min, max);

/** A timer's duration in milliseconds, or null (written `off`, or left out) when it does not run. */
export const timerMs = (min: number, max: number) =>
  z
    .unknown()
    .transform((value, ctx) => (value === null || value === 'off' ? null : checkRange(durations, min, max, value, ctx)))
    .register(ranges, { unit: 'duration', min, max, off: true })
    .default(null);

/** A whole number. */
export const count = (min: number, max: number) => ranged(wholeNumbers, min, max);

/** A byte size ("64MiB", "1.5GB" or a plain number of bytes). */
export const bytes = (min: number, max: number) => ranged(sizes, min, max);

/** A TCP port. */
export const port = () => count(1, 65_535);

/**
 * Ports `first` to `last`, both included. A range whose first port is above its last holds none:
 * refused, as nothing could ever be given a port from it.
 */
export const portRange = () =>
  z.strictObject({ first: port(), last: port() }).refine((r) => r.first <= r.last, {
    path: ['last'],
    message: 'is below first: the range holds no port (both are included: first = last is one port)',
  });

/** A lowercase DNS label: deployment names and host IDs. */
export const label = z
  .string()
  .regex(
    /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/,
    'must be lowercase letters, digits and dashes, 1 to 63 long, starting and ending with a letter or digit',
  );

/** "host:port", as a listener or a Temporal frontend is addressed. */
export const address = z
  .string()
  .regex(/^(\[[0-9a-fA-F:.]+\]|[^\s:[\]]+):\d{1,5}$/, 'must be host:port, such as 127.0.0.1:7443');

/**
 * A list that names each item once: a repeat means nothing (a host named twice is one host) or
 * misleads (`instances: 2` on `hosts: [a, a]` can never run two). Each repeated value is said
 * once, at its first repeat, with where it was first listed.
 */
export const distinctList = <T extends z.ZodType<string>>(item: T) =>
  z.array(item).superRefine((list, ctx) => {
    const firstAt = new Map<string, number>();
    const said = new Set<string>();
    list.forEach((value, i) => {
      const first = firstAt.get(value);
      if (first === undefined) firstAt.set(value, i);
      else if (!said.has(value)) {
        said.add(value);
        ctx.addIssue({ code: 'custom', path: [i], message: `${show(value)} is already listed at index ${first}` });
      }
    });
  });
