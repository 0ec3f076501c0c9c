/** `capyctl create host-token`: a token a host agent registers with (`server.token` in host.yaml). */
import { exitCodes } from '../command.js';
import { operatorCommand, printJson } from '../operatorCommand.js';

export const createHostToken = operatorCommand({
  words: ['create', 'host-token'],
  summary: 'issue a token a host agent registers with; it is shown once',
  positionals: [],
  example: 'capyctl create host-token',
  async run({ api, json }) {
    const reply = await api.call<{ token: string }>('POST', '/host-tokens');
    // Alone on its line, so a script can take it: only its hash is stored.
    if (json) printJson(reply);
    else process.stdout.write(`${reply.token}\n`);
    return exitCodes.ok;
  },
});
