/**
 * pino JSON logs, one line per event; pretty only when a person watches a terminal. Every line
 * of a request or switch carries its id through a child logger (`reqId`, `switchId`).
 */
import pino, { type Logger, type TransportTargetOptions } from 'pino';
import { z } from 'zod';

export type { Logger };

/** `--log-format`, else CAPYCTL_LOG_FORMAT; without either, pretty on a terminal and JSON elsewhere. */
export const logFormats = z.enum(['json', 'pretty']);
export type LogFormat = z.infer<typeof logFormats>;

export interface LogOptions {
  /** Asked for by `--log-format`; wins over CAPYCTL_LOG_FORMAT. */
  format?: LogFormat;
  /** Where the whole JSON log is kept while the terminal shows it pretty (the standalone's `.data/capyctl.log`). */
  jsonFile?: string;
}

/** Where a process's lines go: JSON on stdout, or pretty on stdout with the JSON kept in `jsonFile` when given. */
export interface LogDestination {
  stdout: LogFormat;
  jsonFile?: string;
}

export function logDestination(
  options: LogOptions,
  stdoutIsTTY: boolean,
  env: NodeJS.ProcessEnv = process.env,
): LogDestination {
  const asked = options.format ?? logFormats.safeParse(env.CAPYCTL_LOG_FORMAT).data;
  const stdout = asked ?? (stdoutIsTTY ? 'pretty' : 'json');
  return stdout === 'pretty' && options.jsonFile !== undefined ? { stdout, jsonFile: options.jsonFile } : { stdout };
}

export function createLogger(
  name: string,
  options: LogOptions = {},
  level = process.env.CAPYCTL_LOG_LEVEL ?? 'info',
): Logger {
  const destination = logDestination(options, process.stdout.isTTY === true);
  if (destination.stdout === 'json') return pino({ name, level });
  const { jsonFile } = destination;
  // With the whole log kept in the file, the terminal shows one short line per event (errors still in full).
  const pretty = {
    destination: 1,
    translateTime: 'SYS:HH:MM:ss.l',
    ignore: 'pid,hostname',
    hideObject: jsonFile !== undefined,
  };
  const targets: TransportTargetOptions[] = [
    { target: 'pino-pretty', level, options: pretty },
    ...(jsonFile ? [{ target: 'pino/file', level, options: { destination: jsonFile, mkdir: true } }] : []),
  ];
  const logger = pino({ name, level, transport: { targets } });
  if (jsonFile) logger.info({ jsonFile }, `the whole log, as JSON, is kept in ${jsonFile}`);
  return logger;
}
