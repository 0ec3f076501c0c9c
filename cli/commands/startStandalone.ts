/**
 * `capyctl start standalone [--file standalone.yaml] [--set k=v …]`: the whole system in one process
 * until SIGTERM or SIGINT. It runs on its embedded defaults (a simulated GPU and the example models),
 * which `--file` overrides field by field. On a terminal it shows its logs pretty and keeps them
 * whole, as JSON, in its data folder (capyctl.log); `--log-format json` puts the JSON on stdout instead.
 */
import { resolve } from 'node:path';
import { createLogger } from '../../logging/logger.js';
import { type Command, exitCodes } from '../command.js';
import { processSettings, START_FLAGS_USAGE, startedOrRefused, untilStopSignal } from '../processSettings.js';

/** In the data folder: the whole JSON log while the terminal shows it pretty. */
export const STANDALONE_LOG_FILE = 'capyctl.log';

export const startStandalone: Command = {
  words: ['start', 'standalone'],
  summary: 'run everything on this machine: server, host, Temporal dev server and an embedded database',
  usage: `capyctl start standalone [--file standalone.yaml] ${START_FLAGS_USAGE}`,
  example: 'capyctl start standalone --set host.resource_policy.queue.max_pending_per_deployment=0',
  async run(args) {
    const { settings, logFormat } = await processSettings('standalone', args);
    // Loaded here, not at the top: the Temporal worker is heavy and other commands do not need it.
    const [{ startStandalone: start }, { ListenRefused }, { RegistrationRefused }, { HostEnginesRefused }] =
      await Promise.all([
        import('../../standalone/standalone.js'),
        import('../../server/server.js'),
        import('../../hostAgent/serverClient.js'),
        import('../../hostAgent/agent.js'),
      ]);
    const logger = createLogger('capyctl-standalone', {
      format: logFormat,
      jsonFile: resolve(settings.data_dir, STANDALONE_LOG_FILE),
    });
    // Another standalone (or anything else) may have its ports; another installation on the same
    // Temporal, its host's ID; its host's engines section may be refused.
    const standalone = await startedOrRefused(
      () => start(settings, logger),
      [ListenRefused, RegistrationRefused, HostEnginesRefused],
    );
    if (!standalone) return exitCodes.refused;
    const signal = await untilStopSignal();
    logger.info({ signal }, 'stopping: running answers finish first, up to the drain bound');
    await standalone.stop();
    logger.info('standalone stopped');
    return exitCodes.ok;
  },
};
