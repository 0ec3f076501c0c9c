/**
 * What a command that starts a process shares: its settings (`--file F`, `--set path=value …`), its
 * log format (`--log-format json|pretty`), its start and its stop.
 */
import { parseArgs } from 'node:util';
import { type LogFormat, logFormats } from '../logging/logger.js';
import { type BaseDocument, type DocumentKind, loadSettingsFile, type SettingsOf } from '../settings/load.js';
import { embeddedStandaloneDocument } from '../standalone/embeddedDocument.js';
import { failure } from './failure.js';

/**
 * What a kind's `--file` overrides field by field, and what runs without one: a standalone's embedded
 * defaults (a file that leaves out `host.engines` keeps the simulator). The other kinds have none.
 */
export const baseDocument = (kind: DocumentKind): BaseDocument | undefined =>
  kind === 'standalone' ? embeddedStandaloneDocument() : undefined;

/** The flags every start takes besides its `--file`, as its usage line shows them. */
export const START_FLAGS_USAGE = `[--set path=value …] [--log-format ${logFormats.options.join('|')}]`;

export interface ProcessOptions<K extends DocumentKind> {
  settings: SettingsOf<K>;
  /** Left out when not asked for: then CAPYCTL_LOG_FORMAT, or the terminal, decides. */
  logFormat?: LogFormat;
}

/** The settings and the log format; a flag or a document that is wrong is thrown, for main to print (failure.ts). */
export async function processSettings<K extends DocumentKind>(
  kind: K,
  args: readonly string[],
): Promise<ProcessOptions<K>> {
  const { values } = parseArgs({
    args: [...args],
    options: { file: { type: 'string' }, set: { type: 'string', multiple: true }, 'log-format': { type: 'string' } },
  });
  const asked = values['log-format'];
  const logFormat = asked === undefined ? undefined : logFormats.safeParse(asked).data;
  if (asked !== undefined && logFormat === undefined)
    throw await failure('notAChoice', '--log-format', logFormats.options, asked);
  const settings = loadSettingsFile(kind, values.file, { sets: values.set ?? [], base: baseDocument(kind) });
  return logFormat === undefined ? { settings } : { settings, logFormat };
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
export async function startedOrRefused<T>(
  start: () => Promise<T>,
  refusals: ReadonlyArray<abstract new (...args: never[]) => Error>,
): Promise<T | undefined> {
  try {
    return await start();
  } catch (e) {
    if (!refusals.some((refusal) => e instanceof refusal)) throw e;
    process.stderr.write(`capyctl: ${(e as Error).message}\n`);
    return undefined;
  }
}
