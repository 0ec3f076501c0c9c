/** `capyctl list deployments [--json]`: each model's state, laid out as in the spec. */
import type { DeploymentBody } from '../../api/deployments.js';
import { exitCodes, printJson } from '../command.js';
import { operatorCommand } from '../operatorCommand.js';
import { table } from '../table.js';

/** The list's row of one deployment: `NAME STATE READY REVISION HOSTS`. */
export function deploymentRow(d: DeploymentBody): string[] {
  return [
    d.name,
    d.state,
    `${d.ready_instances}/${d.desired_instances}`,
    String(d.revision),
    d.hosts.length > 0 ? d.hosts.join(',') : '-',
  ];
}

export const listDeployments = operatorCommand({
  words: ['list', 'deployments'],
  summary: 'list the deployments: state, ready instances, revision and hosts',
  positionals: [],
  example: 'capyctl list deployments',
  async run({ api, json }) {
    const { deployments } = await api.call<{ deployments: DeploymentBody[] }>('GET', '/deployments');
    if (json) printJson(deployments);
    else process.stdout.write(table(['NAME', 'STATE', 'READY', 'REVISION', 'HOSTS'], deployments.map(deploymentRow)));
    return exitCodes.ok;
  },
});
