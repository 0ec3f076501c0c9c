/** `capyctl start host --file host.yaml [--set k=v …]`: runs the host agent until SIGTERM or SIGINT. */
import { parseArgs } from 'node:util';
import { createLogger } from '../../logging/logger.js';
import { loadSettingsFile, SettingsError } from '../../settings/load.js';
import { type Command, exitCodes } from '../command.js';

export const startHost: Command = {
  words: ['start', 'host'],
  summary: 'run the host agent: register this machine’s GPUs and run its engines',
  usage: 'capyctl start host --file host.yaml [--set path=value …]',
  example: 'capyctl start host --file host.yaml --set lifecycle.activation=explicit',
  async run(args) {
    const { values } = parseArgs({
      args: [...args],
      options: { file: { type: 'string' }, set: { type: 'string', multiple: true } },
    });
    let settings;
    try {
      settings = loadSettingsFile('host', values.file, { sets: values.set ?? [] });
    } catch (e) {
      if (!(e instanceof SettingsError)) throw e;
      process.stderr.write(`${e.message}\n`);
      return exitCodes.usage;
    }
    // Loaded here, not at the top: the Temporal worker is heavy and other commands do not need it.
    const { startHostAgent } = await import('../../hostAgent/agent.js');
    const { RegistrationRefused } = await import('../../hostAgent/serverClient.js');
    const logger = createLogger('capyctl-host');
    const stopping = new AbortController();
    let agent;
    try {
      agent = await startHostAgent(settings, logger, stopping.signal);
    } catch (e) {
      if (!(e instanceof RegistrationRefused)) throw e;
      process.stderr.write(`capyctl: ${e.message}\n`);
      return exitCodes.refused;
    }
    await new Promise<void>((resolve) => {
      const stop = (signal: NodeJS.Signals) => {
        logger.info({ signal }, 'stopping the host agent');
        stopping.abort();
        resolve();
      };
      process.once('SIGTERM', stop);
      process.once('SIGINT', stop);
    });
    await agent.stop();
    return exitCodes.ok;
  },
};
