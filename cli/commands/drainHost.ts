/**
 * `capyctl drain host ID`: nothing is placed on the host any more, and what it holds stops.
 * `capyctl undrain host ID` ends the drain: models may be placed there again.
 */
import type { DrainReply, UndrainReply } from '../../api/hostAdmin.js';
import { exitCodes, printJson } from '../command.js';
import { operatorCommand } from '../operatorCommand.js';
import { receiptText } from '../receipt.js';

export const drainHost = operatorCommand({
  words: ['drain', 'host'],
  summary: 'drain a host: stop every model it holds and place nothing on it any more',
  positionals: ['ID'],
  example: 'capyctl drain host gpu-box',
  async run({ api, args: [id], json }) {
    const reply = await api.call<DrainReply>('POST', `/hosts/${encodeURIComponent(id!)}/drain`);
    if (json) printJson(reply);
    else process.stdout.write(`${reply.host_id}: draining\n${reply.released.map((r) => receiptText(r)).join('')}`);
    return exitCodes.ok;
  },
});

export const undrainHost = operatorCommand({
  words: ['undrain', 'host'],
  summary: "end a host's drain: models may be placed on it again",
  positionals: ['ID'],
  example: 'capyctl undrain host gpu-box',
  async run({ api, args: [id], json }) {
    const reply = await api.call<UndrainReply>('POST', `/hosts/${encodeURIComponent(id!)}/undrain`);
    if (json) printJson(reply);
    else process.stdout.write(`${reply.host_id}: ready\n`);
    return exitCodes.ok;
  },
});
