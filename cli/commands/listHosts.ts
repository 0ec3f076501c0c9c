/** `capyctl list hosts [--json]`: the registered hosts, their GPUs, their state and their last report. */
import type { HostBody } from '../../api/hostAdmin.js';
import { exitCodes, printJson } from '../command.js';
import { operatorCommand } from '../operatorCommand.js';
import { readableAge, readableBytes } from '../readable.js';
import { table } from '../table.js';

export const listHosts = operatorCommand({
  words: ['list', 'hosts'],
  summary:
    'list the registered hosts: GPUs, host RAM, their state (ready, draining, stopping, down) and when each last ' +
    'reported',
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
      h.gpus.map((g) => `${readableBytes(g.memory_bytes)} ${g.memory_kind}`).join(', ') || '-',
      h.host_ram_bytes === null ? '-' : readableBytes(h.host_ram_bytes),
      h.state,
      readableAge(h.last_seen_at),
    ]);
    process.stdout.write(table(['ID', 'GPUS', 'HOST RAM', 'STATE', 'LAST SEEN'], rows));
    return exitCodes.ok;
  },
});
