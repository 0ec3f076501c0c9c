/** Reads options out of an engine's argv the way the engines' argument parsers do. */

/**
 * `--max_num_seqs` and `--max-num-seqs` are the same option to vLLM's parser; a single-dash alias
 * (`-tp`) is its own spelling.
 */
const canonical = (name: string): string => (name.startsWith('--') ? `--${name.slice(2).replaceAll('_', '-')}` : name);

/** An option, not a value: `--x`, `-tp`; a negative number is a value. */
const isOption = (arg: string): boolean => /^-[^\d.]/.test(arg);

/**
 * The option `name` in `args`: undefined when absent, else its value, written `--name V` or
 * `--name=V`, or `-n V` / `-n=V` for a single-dash alias (a flag without a value is `''`). The last occurrence wins, as
 * with argparse, so extra arguments placed after the host's command override it.
 */
export function findOption(args: readonly string[], name: string): string | undefined {
  const wanted = canonical(name);
  let found: string | undefined;
  args.forEach((arg, i) => {
    if (!isOption(arg)) return;
    const eq = arg.indexOf('=');
    if (eq >= 0 ? canonical(arg.slice(0, eq)) === wanted : canonical(arg) === wanted) {
      const next = args[i + 1];
      found = eq >= 0 ? arg.slice(eq + 1) : next !== undefined && !isOption(next) ? next : '';
    }
  });
  return found;
}

/** The option's value as a positive whole number, undefined when absent or not one. */
export function findCount(args: readonly string[], name: string): number | undefined {
  const value = findOption(args, name);
  return value !== undefined && /^\d+$/.test(value) && Number(value) > 0 ? Number(value) : undefined;
}
