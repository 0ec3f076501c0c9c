/** `capyctl start host --file host.yaml [--set k=v …]`: runs the host agent until SIGTERM or SIGINT. */
import { createLogger } from '../../logging/logger.js';
import { type Command, exitCodes } from '../command.js';
import { processSettings, START_FLAGS_USAGE, startedOrRefused, untilStopSignal } from '../processSettings.js';

export const startHost: Command = {
  words: ['start', 'host'],
  summary: 'run the host agent: register this machine’s GPUs and run its engines',
  usage: `capyctl start host --file host.yaml ${START_FLAGS_USAGE}`,
  example: 'capyctl start host --file host.yaml --set lifecycle.activation=explicit',
  async run(args) {
    const { settings, logFormat } = await processSettings('host', args);
    // Loaded here, not at the top: the Temporal worker is heavy and other commands do not need it.
    const { HostEnginesRefused, startHostAgent } = await import('../../hostAgent/agent.js');
    const { RegistrationRefused } = await import('../../hostAgent/serverClient.js');
    const logger = createLogger('capyctl-host', { format: logFormat });
    const agent = await startedOrRefused(
      () => startHostAgent(settings, logger),
      [RegistrationRefused, HostEnginesRefused],
    );
    if (!agent) return exitCodes.refused;
    const signal = await untilStopSignal();
    logger.info({ signal }, 'stopping the host agent');
    await agent.stop();
    return exitCodes.ok;
  },
};
