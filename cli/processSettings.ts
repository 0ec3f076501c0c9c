/** The settings of a process a command starts: `--file F` and `--set path=value …`. */
import { parseArgs } from 'node:util';
import { type DocumentKind, loadSettingsFile, SettingsError, type SettingsOf } from '../settings/load.js';

/** The settings, or undefined once the reason they are invalid has been printed. */
export function processSettings<K extends DocumentKind>(kind: K, args: readonly string[]): SettingsOf<K> | undefined {
  const { values } = parseArgs({ args: [...args], options: { file: { type: 'string' }, set: { type: 'string', multiple: true } } });
  try {
    return loadSettingsFile(kind, values.file, { sets: values.set ?? [] });
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
