/**
 * `--set a.b=c` and `CAPYCTL_SET__A__B=c`, applied to a document before it is validated:
 * the document first, then the variables, then the flags, so `--set` wins over the variable and
 * both over the document. Values are read as YAML scalars, as if written in the document.
 */
import YAML from 'yaml';

export const ENV_PREFIX = 'CAPYCTL_SET__';

export interface Override {
  path: string[];
  value: unknown;
  /** Where it came from, for error messages: `--set a.b=c` or `CAPYCTL_SET__A__B`. */
  source: string;
}

export type Document = Record<string, unknown>;

const readValue = (text: string): unknown => {
  try {
    return YAML.parse(text) ?? null;
  } catch {
    return text;
  }
};

/** Overrides from `--set` flags, in order; a flag without `=` or without a path is a problem. */
export function overridesFromFlags(sets: readonly string[], problems: string[]): Override[] {
  const overrides: Override[] = [];
  for (const set of sets) {
    const eq = set.indexOf('=');
    const path = eq > 0 ? set.slice(0, eq).split('.') : [];
    if (eq <= 0 || path.some((segment) => segment === '')) {
      problems.push(`--set ${set}: expected path=value, such as resource_policy.queue.max_pending_per_deployment=0`);
      continue;
    }
    overrides.push({ path, value: readValue(set.slice(eq + 1)), source: `--set ${set}` });
  }
  return overrides;
}

/** Overrides from `CAPYCTL_SET__…` variables, in name order; `__` separates the path's sections. */
export function overridesFromEnv(env: NodeJS.ProcessEnv): Override[] {
  return Object.keys(env)
    .filter((name) => name.startsWith(ENV_PREFIX) && name.length > ENV_PREFIX.length)
    .sort()
    .map((name) => ({
      path: name.slice(ENV_PREFIX.length).toLowerCase().split('__'),
      value: readValue(env[name] ?? ''),
      source: name,
    }));
}

/** A mapping of settings, not a list or a value. */
export const isSection = (v: unknown): v is Document => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Writes each override into `doc` (a copy is not made) and records where each path came from. */
export function applyOverrides(
  doc: Document,
  overrides: readonly Override[],
  sources: Map<string, string>,
  problems: string[],
): void {
  for (const { path, value, source } of overrides) {
    let section = doc;
    const parents = path.slice(0, -1);
    const blocked = parents.findIndex((key) => {
      if (section[key] === undefined) section[key] = {};
      const next = section[key];
      if (!isSection(next)) return true;
      section = next;
      return false;
    });
    if (blocked >= 0) {
      problems.push(
        `${path.slice(0, blocked + 1).join('.')}: is a value, not a section, so ${source} cannot set ${path.join('.')}`,
      );
      continue;
    }
    section[path[path.length - 1]!] = value;
    sources.set(path.join('.'), source);
  }
}
