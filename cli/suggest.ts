/** "Did you mean": the commands whose words are closest to what was typed. */

/** Edits from `a` to `b` (insert, delete, replace a character; swap two neighbours counts one, as a typo does). */
export function editDistance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++)
    for (let j = 1; j <= b.length; j++) {
      const replace = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i]![j] = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + replace);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        d[i]![j] = Math.min(d[i]![j]!, d[i - 2]![j - 2]! + 1);
    }
  return d[a.length]![b.length]!;
}

/** How far a typo may be from a command's words: one edit in four characters, at least one. */
const tolerated = (words: string) => Math.max(1, Math.floor(words.length / 4));

/** What was typed in place of a command: the words before the first flag. */
export function leadingWords(argv: readonly string[]): readonly string[] {
  const end = argv.findIndex((a) => a.startsWith('-'));
  return end === -1 ? argv : argv.slice(0, end);
}

/**
 * The commands (by their words, joined) that `typed` may have meant: those as close as the
 * closest, or one edit further (`stat` is one from `start` and two from `status`). Only as many
 * words are compared as the command has, or as were typed: `list` means both lists.
 */
export function closestCommands(typed: readonly string[], commands: ReadonlyArray<readonly string[]>): string[] {
  if (typed.length === 0) return [];
  const scored = commands.flatMap((words) => {
    const n = Math.min(typed.length, words.length);
    const theirs = words.slice(0, n).join(' ');
    const distance = editDistance(typed.slice(0, n).join(' '), theirs);
    return distance <= tolerated(theirs) ? [{ command: words.join(' '), distance }] : [];
  });
  const best = Math.min(...scored.map((s) => s.distance));
  return scored
    .filter((s) => s.distance <= best + 1)
    .sort((a, b) => a.distance - b.distance)
    .map((s) => s.command);
}
