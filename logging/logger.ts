/**
 * pino JSON logs, one line per event; pretty only when a person watches a terminal. Every line
 * of a request or switch carries its id through a child logger (`reqId`, `switchId`).
 */
import pino, { type Logger } from 'pino';

export type { Logger };

export function createLogger(name: string, level = process.env.CAPYCTL_LOG_LEVEL ?? 'info'): Logger {
  const pretty = process.stdout.isTTY && process.env.CAPYCTL_LOG_FORMAT !== 'json';
  return pino({
    name,
    level,
    ...(pretty ? { transport: { target: 'pino-pretty', options: { destination: 1, translateTime: 'SYS:HH:MM:ss.l' } } } : {}),
  });
}
