/**
 * Reads a settings document of one kind: YAML text, then `CAPYCTL_SET__…` variables, then
 * `--set` flags, validated by that kind's schema. Every problem is reported at once, each with its
 * path, the value and what is allowed, or the unknown key by name.
 */
import { readFileSync } from 'node:fs';
import YAML, { Lexer, LineCounter, Parser } from 'yaml';
import { z } from 'zod';
import { MAX_NESTING } from '../domain/limits.js';
import { deploymentDocument } from './deploymentDocument.js';
import { show } from './fields.js';
import { hostDocument } from './hostDocument.js';
import { applyOverrides, type Document, isSection, overridesFromEnv, overridesFromFlags } from './overrides.js';
import { serverDocument } from './serverDocument.js';
import { standaloneDocument } from './standaloneDocument.js';

export const documentSchemas = {
  standalone: standaloneDocument,
  server: serverDocument,
  host: hostDocument,
  deployment: deploymentDocument,
} as const;
export type DocumentKind = keyof typeof documentSchemas;
export type SettingsOf<K extends DocumentKind> = z.output<(typeof documentSchemas)[K]>;

export class SettingsError extends Error {
  constructor(
    readonly kind: DocumentKind,
    readonly origin: string | undefined,
    readonly problems: readonly string[],
  ) {
    super(`invalid ${kind} settings${origin ? ` in ${origin}` : ''}:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'SettingsError';
  }
}

/** A document another one overrides field by field: the standalone's embedded defaults under its `--file`. */
export interface BaseDocument {
  text: string;
  /** What `settings check` says it checked when no file is given. */
  origin: string;
}

export interface SettingsInput {
  /** The document's YAML text; absent means an empty document (every default, or the base). */
  text?: string;
  /**
   * What the document overrides field by field: a mapping the document also has merges key by key,
   * while a list or a value the document gives replaces the base's. The schema's defaults fill the rest.
   */
  base?: BaseDocument;
  /** Named in error messages: the document's file name. */
  origin?: string;
  /** `--set path=value` flags, in the order given. */
  sets?: readonly string[];
  /** Where `CAPYCTL_SET__…` variables are read (not for deployments); `{}` ignores the environment. */
  env?: NodeJS.ProcessEnv;
}

/**
 * Whether lists and mappings nest deeper than MAX_NESTING, block or flow alike: read token by token
 * from the parser's own stack (the parser does not recurse, composing does), stopping at the limit.
 * Settings nest a few levels; composing a document nested thousands deep (`[[[…`, or `- - - …` on one
 * line) recurses as deep, and near the end of the stack V8 has been seen to abort the whole process
 * ("RegExpCompiler Allocation failed") instead of throwing.
 */
function nestsTooDeep(text: string): boolean {
  const parser = new Parser();
  for (const lexeme of new Lexer().lex(text)) {
    Array.from(parser.next(lexeme));
    // Besides the collections, the stack holds the document and the scalar being read.
    if (parser.stack.length > MAX_NESTING + 2) return true;
  }
  return false;
}

/** Where a mapping of the document says a key again (`line L, column C`), if one does. */
function firstRepeatedKey(parsed: YAML.Document, lines: LineCounter): string | undefined {
  let found: string | undefined;
  YAML.visit(parsed, {
    Map(_, map) {
      const seen = new Set<string>();
      for (const pair of map.items) {
        const key = YAML.isScalar(pair.key) ? `=${String(pair.key.value)}` : JSON.stringify(pair.key);
        if (!seen.has(key)) {
          seen.add(key);
          continue;
        }
        const { line, col } = lines.linePos((YAML.isNode(pair.key) ? pair.key.range?.[0] : undefined) ?? 0);
        found = `line ${line}, column ${col}`;
        return YAML.visit.BREAK;
      }
      return undefined;
    },
  });
  return found;
}

/** Parses YAML into a mapping, reporting a malformed document with its line and column. */
function parseYaml(text: string, problems: string[]): Document {
  if (nestsTooDeep(text)) {
    problems.push(`malformed YAML: lists and mappings nest more than ${MAX_NESTING} levels deep`);
    return {};
  }
  // The library's own check of unique keys compares every key with every other (a document of
  // 100,000 keys took minutes); one pass with a set says the same, and where by the line counter
  // the library fills anyway to place its own errors.
  const lines = new LineCounter();
  const parsed = YAML.parseDocument(text, { uniqueKeys: false, lineCounter: lines });
  for (const e of parsed.errors) problems.push(`malformed YAML: ${e.message.split('\n')[0]!.replace(/:$/, '')}`);
  if (parsed.errors.length > 0) return {};
  const repeated = firstRepeatedKey(parsed, lines);
  if (repeated) {
    problems.push(`malformed YAML: Map keys must be unique at ${repeated}`);
    return {};
  }
  const value: unknown = parsed.toJS();
  if (value === null || value === undefined) return {};
  if (typeof value !== 'object' || Array.isArray(value)) {
    problems.push(`the document must be a mapping of settings, not ${show(value)}`);
    return {};
  }
  return value as Document;
}

const valueAt = (doc: unknown, path: readonly PropertyKey[]): unknown =>
  path.reduce<unknown>(
    (v, key) => (typeof v === 'object' && v !== null ? (v as Record<PropertyKey, unknown>)[key] : undefined),
    doc,
  );

/** One line per zod issue: `path: what is wrong (from --set …)`. */
function describeIssue(issue: z.core.$ZodIssue, doc: Document, sources: Map<string, string>): string[] {
  // The override that wrote this path, or one below it (an unknown section it created).
  const from = (path: readonly PropertyKey[]) => {
    const key = path.join('.');
    const hit = [...sources].find(([written]) => written === key || written.startsWith(`${key}.`));
    return hit ? ` (from ${hit[1]})` : '';
  };
  const where = (path: readonly PropertyKey[]) => (path.length > 0 ? path.join('.') : 'the document');
  if (issue.code === 'unrecognized_keys') {
    return issue.keys.map((key) => {
      const path = [...issue.path, key];
      return `${where(path)}: unknown key${from(path)}`;
    });
  }
  const value = valueAt(doc, issue.path);
  let what: string;
  if (value === undefined) what = issue.code === 'custom' ? issue.message : 'is required';
  else if (issue.code === 'invalid_value') what = `${show(value)} is not one of ${issue.values.map(String).join(', ')}`;
  else if (issue.code === 'invalid_type')
    what = `${show(value)} is not ${issue.expected === 'array' ? 'a list' : `a ${issue.expected}`}`;
  else if (issue.code === 'invalid_format' || (issue.code === 'too_small' && typeof value === 'string'))
    what = `${show(value)} ${issue.message}`;
  else what = issue.message;
  return [`${where(issue.path)}: ${what}${from(issue.path)}`];
}

/** `over` on top of `base`, field by field (see `SettingsInput.base`). */
function overlay(base: Document, over: Document): Document {
  const merged: Document = { ...base };
  for (const [key, value] of Object.entries(over)) {
    const under = merged[key];
    merged[key] = isSection(under) && isSection(value) ? overlay(under, value) : value;
  }
  return merged;
}

/** Validates a document of `kind` with its overrides; throws SettingsError naming every problem. */
export function loadSettings<K extends DocumentKind>(kind: K, input: SettingsInput = {}): SettingsOf<K> {
  const origin = input.origin;
  const problems: string[] = [];
  const own = parseYaml(input.text ?? '', problems);
  const doc = input.base ? overlay(parseYaml(input.base.text, problems), own) : own;
  const sources = new Map<string, string>();
  // Variables set a process's own settings; a deployment document is only what its file says.
  const env = kind === 'deployment' ? {} : (input.env ?? process.env);
  const overrides = [...overridesFromEnv(env), ...overridesFromFlags(input.sets ?? [], problems)];
  applyOverrides(doc, overrides, sources, problems);
  if (problems.length > 0) throw new SettingsError(kind, origin, problems);

  const result = documentSchemas[kind].safeParse(doc);
  if (!result.success) {
    throw new SettingsError(
      kind,
      origin,
      result.error.issues.flatMap((issue) => describeIssue(issue, doc, sources)),
    );
  }
  return result.data as SettingsOf<K>;
}

/** `loadSettings` for a document on disk (`--file F`); no file means every default. */
export function loadSettingsFile<K extends DocumentKind>(
  kind: K,
  file: string | undefined,
  input: Omit<SettingsInput, 'text' | 'origin'> = {},
): SettingsOf<K> {
  if (file === undefined) return loadSettings(kind, input);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new SettingsError(kind, file, [`the file cannot be read: ${(e as NodeJS.ErrnoException).code ?? String(e)}`]);
  }
  return loadSettings(kind, { ...input, text, origin: file });
}
