/**
 * The Temporal SDK's runtime, installed once per process: its logs go through pino, and it leaves
 * SIGINT/SIGTERM to the process, which shuts its workers down itself (after its listeners).
 */
import { Runtime, type LogLevel, type LogMetadata } from '@temporalio/worker';
import type { Logger } from 'pino';

let installed = false;

export function installTemporalRuntime(logger: Logger): void {
  if (installed) return;
  installed = true;
  const log = (level: LogLevel, message: string, meta?: LogMetadata) => {
    // The workflow bundler's report of every module it packed is for debugging the bundle only.
    const bundlerReport = level === 'INFO' && message.startsWith('asset workflow-bundle');
    const method = bundlerReport
      ? 'debug'
      : ({ TRACE: 'trace', DEBUG: 'debug', INFO: 'info', WARN: 'warn', ERROR: 'error' } as const)[level];
    logger[method](meta ?? {}, message);
  };
  Runtime.install({
    shutdownSignals: [],
    logger: {
      log,
      trace: (m, meta) => log('TRACE', m, meta),
      debug: (m, meta) => log('DEBUG', m, meta),
      info: (m, meta) => log('INFO', m, meta),
      warn: (m, meta) => log('WARN', m, meta),
      error: (m, meta) => log('ERROR', m, meta),
    },
  });
}
