/**
 * `capyctl park|stop|preinitialize|delete deployment NAME`: one command on one deployment, answered
 * with its receipt. A park answers as it begins: parking runs in the background.
 */
import type { ReceiptBody } from '../../api/deployments.js';
import type { Command } from '../command.js';
import { exitCodes, printJson } from '../command.js';
import { operatorCommand } from '../operatorCommand.js';
import { receiptText } from '../receipt.js';
import { whenMemoryFree } from '../waiting.js';

const verbs = {
  park: { summary: 'park a ready model: its GPU memory is given back, a request wakes it', method: 'POST' },
  stop: { summary: 'stop a model; a request does not start it again until `capyctl start deployment`', method: 'POST' },
  preinitialize: { summary: 'start a model and park it at once, so its first request only wakes it', method: 'POST' },
  delete: { summary: 'stop a model and remove its deployment', method: 'DELETE' },
} as const;

function deploymentCommand(verb: keyof typeof verbs): Command {
  return operatorCommand({
    words: [verb, 'deployment'],
    summary: verbs[verb].summary,
    positionals: ['NAME'],
    namesDeployment: true,
    example: `capyctl ${verb} deployment my-model`,
    async run({ api, args: [name], json }) {
      const ref = encodeURIComponent(name!);
      const path = verb === 'delete' ? `/deployments/${ref}` : `/deployments/${ref}/${verb}`;
      const command = () => api.call<ReceiptBody>(verbs[verb].method, path);
      // A preinitialize waits for memory as a start does: here, saying which models hold it.
      const receipt = verb === 'preinitialize' ? await whenMemoryFree(name!, command) : await command();
      if (json) printJson(receipt);
      else {
        // A delete's state is its instance's, stopped: the line says the deployment is gone, and
        // whether a switch stopped what it held first.
        const deleted = receipt.switch_id === undefined ? 'deleted' : 'stopped and deleted';
        process.stdout.write(receiptText(receipt, verb === 'delete' ? deleted : receipt.state));
        if (receipt.state === 'parking')
          process.stdout.write(
            'parking runs in the background; run `capyctl list deployments` until it shows parked\n',
          );
      }
      return exitCodes.ok;
    },
  });
}

export const parkDeployment = deploymentCommand('park');
export const stopDeployment = deploymentCommand('stop');
export const preinitializeDeployment = deploymentCommand('preinitialize');
export const deleteDeployment = deploymentCommand('delete');
