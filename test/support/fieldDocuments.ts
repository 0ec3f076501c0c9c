/**
 * Documents derived from a settings schema itself: its required fields, plus one optional field set
 * to a valid value, one document per field and value. A field added to a schema is then covered by
 * every test that runs these documents, without anyone remembering to add it; a field whose valid
 * value cannot be derived makes `fieldDocuments` throw, naming it, until it is given one.
 */
import { z } from 'zod';
import { rangeOf } from '../../settings/fields.js';
import { formatBytes, formatDuration } from '../../settings/units.js';

type Path = ReadonlyArray<string | number>;
type Document = Record<string, unknown>;

export interface FieldDocument {
  /** The field set, as `--set` writes its path (`resource_policy.queue.admission_window`, `gpus.0.memory_kind`). */
  field: string;
  value: unknown;
  document: Document;
}

/** Values for schemas that say what they accept only as a pattern: by the schema object itself. */
export type KnownValues = ReadonlyMap<z.ZodType, unknown>;

/**
 * Values for fields whose valid values depend on where they stand, not on their schema (a version
 * of the engine the path names): by the field's path, as `--set` writes it.
 */
export type KnownAt = ReadonlyMap<string, unknown>;

// Zod's own description of a schema: its kind and the parts each kind has.
interface Def {
  type: string;
  innerType?: z.ZodType;
  shape?: Record<string, z.ZodType>;
  element?: z.ZodType;
  entries?: Record<string, string>;
  format?: string;
  checks?: Array<{ _zod: { def: { check: string; minimum?: number } } }>;
}
const defOf = (schema: z.ZodType) => (schema as unknown as { _zod: { def: Def } })._zod.def;

const wrappers = new Set(['optional', 'default', 'prefault']);
/** Whether a document may leave the field out. */
const isOptional = (schema: z.ZodType) => wrappers.has(defOf(schema).type);
const unwrap = (schema: z.ZodType): z.ZodType =>
  wrappers.has(defOf(schema).type) ? unwrap(defOf(schema).innerType!) : schema;

const minLength = (def: Def) => def.checks?.find((c) => c._zod.def.check === 'min_length')?._zod.def.minimum ?? 0;

/** Formats a string schema may carry whose valid value follows from the format alone. */
const formatValues: Record<string, string> = { url: 'http://127.0.0.1:9' };

class Deriver {
  constructor(
    private readonly known: KnownValues,
    private readonly knownAt: KnownAt,
  ) {}

  /** Every value tried for a field: each option of a choice, else one valid value. */
  values(schema: z.ZodType, path: Path): unknown[] {
    const at = path.join('.');
    if (this.knownAt.has(at)) return [this.knownAt.get(at)];
    const inner = unwrap(schema);
    if (this.known.has(inner)) return [this.known.get(inner)];
    const range = rangeOf(inner);
    if (range) {
      const format = { duration: formatDuration, bytes: formatBytes, count: (n: number) => n }[range.unit];
      // The top of the range: the bottom of one can be below another field's default (admission
      // window and request deadline), and the top is as valid as the bottom.
      return range.off ? [format(range.max), 'off'] : [format(range.max)];
    }
    const def = defOf(inner);
    switch (def.type) {
      case 'enum':
        return Object.values(def.entries!);
      case 'boolean':
        return [true, false];
      case 'string': {
        if (def.format !== undefined && formatValues[def.format] !== undefined) return [formatValues[def.format]];
        const patterned = def.format !== undefined || (def.checks ?? []).some((c) => c._zod.def.check !== 'min_length');
        if (patterned)
          throw new Error(
            `${path.join('.')}: no value derived for a string with a pattern; give its schema one in the known values`,
          );
        return ['x'.repeat(Math.max(1, minLength(def)))];
      }
      case 'array':
        // Items told apart: a list may refuse a repeat (`distinctList`).
        return [
          Array.from({ length: Math.max(1, minLength(def)) }, (_, i) => {
            const item = this.values(def.element!, [...path, i])[0];
            return typeof item === 'string' && i > 0 ? `${item}${i}` : item;
          }),
        ];
      case 'object':
        return [this.required(inner, path)];
      default:
        throw new Error(
          `${path.join('.')}: no value derived for a ${def.type} field; give its schema one in the known values`,
        );
    }
  }

  /** An object with only its required fields. */
  required(object: z.ZodType, path: Path): Document {
    const shape = defOf(unwrap(object)).shape!;
    return Object.fromEntries(
      Object.entries(shape)
        .filter(([, field]) => !isOptional(field))
        .map(([key, field]) => [key, this.values(field, [...path, key])[0]]),
    );
  }

  /** One document per optional field under `object` (at `path` in `base`) and each of its values. */
  documents(object: z.ZodType, path: Path, base: Document, out: FieldDocument[]): void {
    for (const [key, field] of Object.entries(defOf(unwrap(object)).shape!)) {
      const at = [...path, key];
      const inner = unwrap(field);
      if (isOptional(field)) {
        for (const value of this.values(field, at))
          out.push({ field: at.join('.'), value, document: withValue(base, at, value) });
      }
      const def = defOf(inner);
      if (def.type === 'object')
        this.documents(inner, at, isOptional(field) ? withValue(base, at, this.required(inner, at)) : base, out);
      const element = def.type === 'array' ? unwrap(def.element!) : undefined;
      if (element && defOf(element).type === 'object') {
        this.documents(element, [...at, 0], withValue(base, at, [this.required(element, [...at, 0])]), out);
      }
    }
  }
}

function withValue(base: Document, path: Path, value: unknown): Document {
  const copy = structuredClone(base);
  let at: Record<string | number, unknown> = copy;
  for (const key of path.slice(0, -1)) at = (at[key] ??= {}) as Record<string | number, unknown>;
  at[path[path.length - 1]!] = value;
  return copy;
}

/** The document with only the schema's required fields, and one more per optional field and value. */
export function fieldDocuments(
  schema: z.ZodType,
  known: KnownValues = new Map(),
  knownAt: KnownAt = new Map(),
): { required: Document; documents: FieldDocument[] } {
  const deriver = new Deriver(known, knownAt);
  const required = deriver.required(schema, []);
  const documents: FieldDocument[] = [];
  deriver.documents(schema, [], required, documents);
  return { required, documents };
}
