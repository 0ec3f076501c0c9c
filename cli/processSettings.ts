/** What a command that starts a process shares: its settings (`--file F`, `--set path=value …`), its start and its stop. */
import { parseArgs } from 'node:util';
import { type BaseDocument, type DocumentKind, loadSettingsFile, SettingsError, type SettingsOf } from '../settings/load.js';
import { embeddedStandaloneDocument } from '../standalone/embeddedDocument.js';

/**
 * What a kind's `--file` overrides field by field, and what runs without one: a standalone's embedded
 * defaults (a file that leaves out `host.engines` keeps the simulator). The other kinds have none.
 */
export const baseDocument = (kind: DocumentKind): BaseDocument | undefined => (kind === 'standalone' ? embeddedStandaloneDocument() : undefined);

/** The settings, or undefined once the reason they are invalid has been printed. */
export function processSettings<K extends DocumentKind>(kind: K, args: readonly string[]): SettingsOf<K> | undefined {
  const { values } = parseArgs({ args: [...args], options: { file: { type: 'string' }, set: { type: 'string', multiple: true } } });
  try {
    return loadSettingsFile(kind, values.file, { sets: values.set ?? [], base: baseDocument(kind) });
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
