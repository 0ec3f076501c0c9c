/** Reads options out of an engine's argv the way the engines' argument parsers do. */

/** `--max_num_seqs` and `--max-num-seqs` are the same option to vLLM's parser. */
const canonical = (name: string): string => `--${name.replace(/^--/, '').replaceAll('_', '-')}`;

/**
 * The option `name` in `args`: undefined when absent, else its value, written `--name V` or
 * `--name=V` (a flag without a value is `''`). The last occurrence wins, as
 * with argparse, so extra arguments placed after the host's command override it.
 */
export function findOption(args: readonly string[], name: string): string | undefined {
  const wanted = canonical(name);
  let found: string | undefined;
  args.forEach((arg, i) => {
    if (!arg.startsWith('--')) return;
    const eq = arg.indexOf('=');
    if (eq >= 0 ? canonical(arg.slice(0, eq)) === wanted : canonical(arg) === wanted) {
      const next = args[i + 1];
      found = eq >= 0 ? arg.slice(eq + 1) : next !== undefined && !next.startsWith('--') ? next : '';
    }
  });
  return found;
}

/** The option's value as a positive whole number, undefined when absent or not one. */
export function findCount(args: readonly string[], name: string): number | undefined {
  const value = findOption(args, name);
  return value !== undefined && /^\d+$/.test(value) && Number(value) > 0 ? Number(value) : undefined;
}
