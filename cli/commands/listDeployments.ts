/** `capyctl list deployments [--json]`: each model's state, laid out as in the spec, and its restarts. */
import type { DeploymentBody } from '../../api/deployments.js';
import { exitCodes, printJson } from '../command.js';
import { operatorCommand } from '../operatorCommand.js';
import { table } from '../table.js';

/**
 * The list's row of one deployment: `NAME STATE READY REVISION HOSTS`, with `RESTARTS` when `restarts`.
 * A crash loop is said beside the state, which stays the spec's (kubectl's CrashLoopBackOff beside a phase).
 */
function deploymentRow(d: DeploymentBody, restarts = false): string[] {
  return [
    d.name,
    d.crash_loop ? `${d.state} (crash loop)` : d.state,
    `${d.ready_instances}/${d.desired_instances}`,
    String(d.revision),
    d.hosts.length > 0 ? d.hosts.join(',') : '-',
    ...(restarts ? [String(d.restarts)] : []),
  ];
}

/**
 * The table of deployments, laid out as in the spec; once an engine of any of them ended unasked, with
 * how many times each did (kubectl's RESTARTS).
 */
export function deploymentsTable(deployments: readonly DeploymentBody[]): string {
  const restarts = deployments.some((d) => d.restarts > 0);
  return table(
    ['NAME', 'STATE', 'READY', 'REVISION', 'HOSTS', ...(restarts ? ['RESTARTS'] : [])],
    deployments.map((d) => deploymentRow(d, restarts)),
  );
}

export const listDeployments = operatorCommand({
  words: ['list', 'deployments'],
  summary: 'list the deployments: state, ready instances, revision and hosts',
  positionals: [],
  example: 'capyctl list deployments',
  async run({ api, json }) {
    const { deployments } = await api.call<{ deployments: DeploymentBody[] }>('GET', '/deployments');
    if (json) printJson(deployments);
    else process.stdout.write(deploymentsTable(deployments));
    return exitCodes.ok;
  },
});
