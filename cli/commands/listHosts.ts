/** `capyctl list hosts [--json]`: the registered hosts, their GPUs, their state and their last report. */
import type { HostBody } from '../../api/hostAdmin.js';
import { exitCodes, printJson } from '../command.js';
import { operatorCommand } from '../operatorCommand.js';
import { readableAge, readableBytes } from '../readable.js';
import { table } from '../table.js';

export const listHosts = operatorCommand({
  words: ['list', 'hosts'],
  summary:
    'list the registered hosts: each GPU’s memory used and its total, host RAM, their state (ready, draining, ' +
    'stopping, down) and when each last reported',
  positionals: [],
  example: 'capyctl list hosts',
  async run({ api, json }) {
    const { hosts } = await api.call<{ hosts: HostBody[] }>('GET', '/hosts');
    if (json) {
      printJson(hosts);
      return exitCodes.ok;
    }
    const rows = hosts.map((h) => [
      h.host_id,
      gpusText(h.gpus),
      h.host_ram_bytes === null ? '-' : readableBytes(h.host_ram_bytes),
      h.state,
      readableAge(h.last_seen_at),
    ]);
    process.stdout.write(table(['ID', 'GPUS (USED/TOTAL)', 'HOST RAM', 'STATE', 'LAST SEEN'], rows));
    return exitCodes.ok;
  },
});

/** Each GPU's memory as used/total, in index order, then their kind: once when all are alike. */
function gpusText(gpus: HostBody['gpus']): string {
  if (gpus.length === 0) return '-';
  const usage = (g: HostBody['gpus'][number]) => `${readableBytes(g.used_bytes)}/${readableBytes(g.memory_bytes)}`;
  const alike = gpus.every((g) => g.memory_kind === gpus[0]!.memory_kind);
  return alike
    ? `${gpus.map(usage).join(', ')} ${gpus[0]!.memory_kind}`
    : gpus.map((g) => `${usage(g)} ${g.memory_kind}`).join(', ');
}
