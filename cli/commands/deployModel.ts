/**
 * `capyctl deploy model --file F`: validates the deployment document here (every problem with its
 * field and reason, exit 2) and deploys it. A changed spec makes a new revision, whose checkpoint
 * is then measured; `capyctl start deployment NAME --wait` waits for that.
 */
import type { DeployReply } from '../../api/deployments.js';
import { loadSettingsFile } from '../../settings/load.js';
import { exitCodes, printJson } from '../command.js';
import { failure } from '../failure.js';
import { operatorCommand } from '../operatorCommand.js';

export const deployModel = operatorCommand({
  words: ['deploy', 'model'],
  summary: 'deploy a model from its deployment document; a changed spec makes a new revision',
  positionals: [],
  options: { file: { type: 'string' } },
  flagsUsage: '--file my-model.yaml',
  example: 'capyctl deploy model --file my-model.yaml',
  async run({ api, flags, json }) {
    if (typeof flags.file !== 'string') throw await failure('deployNeedsFile');
    const spec = loadSettingsFile('deployment', flags.file);
    const reply = await api.call<DeployReply>('POST', '/deployments', spec);
    const d = reply.deployment;
    if (json) printJson(reply);
    else {
      const checkpoint = {
        measured: 'its checkpoint is measured',
        measuring: 'its checkpoint is being measured',
        failed: `its checkpoint could not be measured: ${d.checkpoint_failure}`,
      }[d.checkpoint];
      process.stdout.write(
        `${d.name}: ${reply.outcome}, revision ${d.revision} (deployment ${d.deployment_id}); ${checkpoint}\n`,
      );
    }
    return exitCodes.ok;
  },
});
