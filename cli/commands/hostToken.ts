/**
 * `capyctl create host-token`: a token a host agent registers with (`server.token` in host.yaml).
 * `capyctl revoke host-token ID`: the host's token stops working, so that a new one may register
 * that host ID (a host ID is bound to the token it first registered with).
 */
import type { RevokeTokenReply } from '../../api/hostAdmin.js';
import { exitCodes, printJson } from '../command.js';
import { operatorCommand } from '../operatorCommand.js';

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

export const revokeHostToken = operatorCommand({
  words: ['revoke', 'host-token'],
  summary: 'revoke the token a host registered with; a new token may then register that host ID',
  positionals: ['ID'],
  example: 'capyctl revoke host-token gpu-box',
  async run({ api, args: [id], json }) {
    const reply = await api.call<RevokeTokenReply>('DELETE', `/hosts/${encodeURIComponent(id!)}/token`);
    if (json) printJson(reply);
    else
      process.stdout.write(
        `${reply.host_id}: host token revoked; a new one (capyctl create host-token) may register it\n`,
      );
    return exitCodes.ok;
  },
});
