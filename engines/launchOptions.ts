/** Reads options out of an engine's argv the way the engines' argument parsers (argparse) do. */

/** `--max_num_seqs` and `--max-num-seqs` are one option to vLLM's parser; a single-dash name is taken as written. */
const canonical = (name: string): string => (name.startsWith('--') ? `--${name.slice(2).replaceAll('_', '-')}` : name);

/** argparse's test: a word that starts with a dash is an option unless it reads as a negative number. */
const isOption = (word: string): boolean => word.startsWith('-') && word !== '-' && !/^-(\d+|\d*\.\d+)$/.test(word);

/**
 * The option in `args` under any of its spellings (`--tensor-parallel-size`, `-tp`): undefined when
 * absent, else its value, written `--name V`, `--name=V`, `-tp V` or `-tp=V` (a flag without a value
 * is `''`). The last occurrence of any spelling wins, as argparse stores every spelling in one
 * place, so extra arguments placed after the host's command override it.
 */
export function findOption(args: readonly string[], spellings: string | readonly string[]): string | undefined {
  const wanted = new Set((typeof spellings === 'string' ? [spellings] : spellings).map(canonical));
  let found: string | undefined;
  args.forEach((arg, i) => {
    if (!isOption(arg)) return;
    const eq = arg.indexOf('=');
    if (eq >= 0 ? wanted.has(canonical(arg.slice(0, eq))) : wanted.has(canonical(arg))) {
      const next = args[i + 1];
      found = eq >= 0 ? arg.slice(eq + 1) : next !== undefined && !isOption(next) ? next : '';
    }
  });
  return found;
}

/** The option's value as a positive whole number, undefined when absent or not one. */
export function findCount(args: readonly string[], spellings: string | readonly string[]): number | undefined {
  const value = findOption(args, spellings);
  return value !== undefined && /^\d+$/.test(value) && Number(value) > 0 ? Number(value) : undefined;
}
