/** What every `capyctl` command is: its words, its help with an example, and how it runs. */
export interface Command {
  /** The words that name it: `['settings', 'check']`. */
  words: readonly string[];
  summary: string;
  usage: string;
  example: string;
  /**
   * Returns the exit code, and writes its output itself; a failure it throws (cli/failure.ts) main
   * prints, as one line or, under `--json`, as JSON.
   */
  run(args: readonly string[]): Promise<number>;
}

/** Exit codes: 0 done, 1 the API or an engine refused, 2 the command or a document was wrong. */
export const exitCodes = { ok: 0, refused: 1, usage: 2 } as const;

/** Writes `value` as `--json` prints it: an answer, and under `--json` a failure too. */
export const printJson = (value: unknown) => process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
