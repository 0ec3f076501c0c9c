/** What a command that starts a process shares: its settings (`--file F`, `--set path=value …`), its start and its stop. */
import { parseArgs } from 'node:util';
import { type DocumentKind, loadSettings, loadSettingsFile, SettingsError, type SettingsOf } from '../settings/load.js';

/**
 * The settings, or undefined once the reason they are invalid has been printed. Without `--file`,
 * the document is `embedded` (the standalone's defaults), or empty.
 */
export function processSettings<K extends DocumentKind>(kind: K, args: readonly string[], embedded?: { text: string; origin: string }): SettingsOf<K> | undefined {
  const { values } = parseArgs({ args: [...args], options: { file: { type: 'string' }, set: { type: 'string', multiple: true } } });
  try {
    const sets = values.set ?? [];
    if (values.file === undefined && embedded) return loadSettings(kind, { ...embedded, sets });
    return loadSettingsFile(kind, values.file, { sets });
  } catch (e) {
    if (!(e instanceof SettingsError)) throw e;
    process.stderr.write(`${e.message}\n`);
    return undefined;
  }
}

/** Resolves on SIGTERM or SIGINT: a started process runs until then. */
export const untilStopSignal = () =>
  new Promise<NodeJS.Signals>((resolve) => {
    process.once('SIGTERM', resolve);
    process.once('SIGINT', resolve);
  });

/**
 * Starts the process; a start refused for a reason its operator fixes (an error of one of `refusals`:
 * a port taken, a token refused) is one line on stderr and undefined, not a stack.
 */
export async function startedOrRefused<T>(start: () => Promise<T>, refusals: ReadonlyArray<abstract new (...args: never[]) => Error>): Promise<T | undefined> {
  try {
    return await start();
  } catch (e) {
    if (!refusals.some((refusal) => e instanceof refusal)) throw e;
    process.stderr.write(`capyctl: ${(e as Error).message}\n`);
    return undefined;
  }
}
