/** `capyctl status deployment NAME [--json]`: one deployment, its activation, its checkpoint and why its last start failed. */
import type { DeploymentBody } from '../../gateway/management/deployments.js';
import { exitCodes } from '../command.js';
import { operatorCommand, printJson } from '../operatorCommand.js';
import { table } from '../table.js';
import { deploymentRow } from './listDeployments.js';

export const statusDeployment = operatorCommand({
  words: ['status', 'deployment'],
  summary: 'show one deployment: its row, ID, activation, checkpoint and instances',
  positionals: ['NAME'],
  example: 'capyctl status deployment my-model --json',
  async run({ api, args: [name], json }) {
    const d = await api.call<DeploymentBody>('GET', `/deployments/${encodeURIComponent(name!)}`);
    if (json) {
      printJson(d);
      return exitCodes.ok;
    }
    const facts = [
      ['deployment_id', d.deployment_id],
      ['activation', d.activation],
      ['checkpoint', d.checkpoint],
      ['operator_stopped', d.operator_stopped ? 'yes' : 'no'],
    ];
    process.stdout.write(table(['NAME', 'STATE', 'READY', 'REVISION', 'HOSTS'], [deploymentRow(d)]));
    if (d.start_failure !== undefined) facts.push(['start_failure', d.start_failure]);
    process.stdout.write(`\n${facts.map(([k, v]) => `${k}: ${v}`).join('\n')}\n`);
    if (d.instances.length > 0) {
      const rows = d.instances.map((i) => [String(i.index), i.host_id, String(i.generation), i.state]);
      process.stdout.write(`\n${table(['INSTANCE', 'HOST', 'GENERATION', 'STATE'], rows)}`);
    }
    return exitCodes.ok;
  },
});
