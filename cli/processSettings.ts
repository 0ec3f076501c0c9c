/** The settings of a process a command starts: `--file F` and `--set path=value …`. */
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
