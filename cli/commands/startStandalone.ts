/**
 * `capyctl start standalone [--file standalone.yaml] [--set k=v …]`: the whole system in one process
 * until SIGTERM or SIGINT. It runs on its embedded defaults (a simulated GPU and the example models),
 * which `--file` overrides field by field.
 */
import { createLogger } from '../../logging/logger.js';
import { type Command, exitCodes } from '../command.js';
import { processSettings, startedOrRefused, untilStopSignal } from '../processSettings.js';

export const startStandalone: Command = {
  words: ['start', 'standalone'],
  summary: 'run everything on this machine: server, host, Temporal dev server and an embedded database',
  usage: 'capyctl start standalone [--file standalone.yaml] [--set path=value …]',
  example: 'capyctl start standalone --set host.resource_policy.queue.max_pending_per_deployment=0',
  async run(args) {
    const settings = processSettings('standalone', args);
    if (!settings) return exitCodes.usage;
    // Loaded here, not at the top: the Temporal worker is heavy and other commands do not need it.
    const [{ startStandalone: start }, { ListenRefused }] = await Promise.all([import('../../standalone/standalone.js'), import('../../server/server.js')]);
    const logger = createLogger('capyctl-standalone');
    // Another standalone (or anything else) may have its ports.
    const standalone = await startedOrRefused(() => start(settings, logger), [ListenRefused]);
    if (!standalone) return exitCodes.refused;
    const signal = await untilStopSignal();
    logger.info({ signal }, 'stopping: running answers finish first, up to the drain bound');
    await standalone.stop();
    logger.info('standalone stopped');
    return exitCodes.ok;
  },
};
