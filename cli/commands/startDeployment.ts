/**
 * `capyctl start deployment NAME [--evict] [--wait]`. The API answers as the start's switch begins,
 * with the switch and its victims; the start runs in the background. Without `--evict` a start never
 * parks anything: while other models hold its memory the API refuses it, and the command asks again
 * until the memory is free (it waits for memory, and nothing acts once it is ended). `--wait` first
 * waits for the checkpoint measurement (without it, an unmeasured checkpoint is refused), then
 * follows the switch until the model is ready, saying what it waits for and for how long, and prints
 * the receipt as the switch ended.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { DeploymentBody, ReceiptBody } from '../../api/deployments.js';
import type { SwitchBody } from '../../api/switches.js';
import { awaitsMeasurement } from '../../domain/measurement.js';
import { exitCodes, printJson } from '../command.js';
import { ApiRefusal } from '../failure.js';
import type { ManagementClient } from '../managementClient.js';
import { operatorCommand } from '../operatorCommand.js';
import { receiptText } from '../receipt.js';
import { takenWhenMemoryFree, waitingFor, whenMemoryFree } from '../waiting.js';

const MEASUREMENT_POLL_MS = 250;
const SWITCH_POLL_MS = 250;

/** Until it is measured, or its measurement failed: the start then says why it is refused. */
async function untilMeasured(api: ManagementClient, ref: string): Promise<void> {
  while (awaitsMeasurement((await api.call<DeploymentBody>('GET', `/deployments/${ref}`)).checkpoint)) {
    await sleep(MEASUREMENT_POLL_MS);
  }
}

/** Follows the start's switch until it ends: the receipt as it ended, or the error its target got. */
async function untilSwitched(api: ManagementClient, receipt: ReceiptBody): Promise<ReceiptBody> {
  if (receipt.switch_id === undefined || receipt.state === 'ready') return receipt;
  let switched: SwitchBody;
  while ((switched = await api.call<SwitchBody>('GET', `/switches/${receipt.switch_id}`)).outcome === 'running')
    await sleep(SWITCH_POLL_MS);
  const { error, target } = switched;
  if (error && target?.state !== 'ready') throw new ApiRefusal(0, error.code, error.message, error.retryable);
  const victims = switched.victims.filter((v) => v.deployment_id !== receipt.deployment_id);
  return { ...receipt, victims, state: target?.state ?? receipt.state };
}

export const startDeployment = operatorCommand({
  words: ['start', 'deployment'],
  summary: 'start (or wake) a model; --evict may park others to make room, --wait waits for its measurement and ready',
  positionals: ['NAME'],
  namesDeployment: true,
  options: { evict: { type: 'boolean' }, wait: { type: 'boolean' } },
  flagsUsage: '[--evict] [--wait]',
  example: 'capyctl start deployment other-model --evict --wait',
  async run({ api, args: [name], flags, json }) {
    const ref = encodeURIComponent(name!);
    const start = () => api.call<ReceiptBody>('POST', `/deployments/${ref}/start`, { evict: flags.evict === true });
    let receipt: ReceiptBody;
    if (flags.wait === true) {
      const d = await api.call<DeploymentBody>('GET', `/deployments/${ref}`);
      if (awaitsMeasurement(d.checkpoint))
        await waitingFor(`the checkpoint measurement of ${name}`, () => untilMeasured(api, ref));
      const ready = `${name} to be ready`;
      receipt = await waitingFor(ready, async (update) => {
        const begun = await takenWhenMemoryFree(name!, start, update);
        update(ready);
        return untilSwitched(api, begun);
      });
    } else {
      // Without --evict a start waits for memory (spec): here, where the operator sees it and can
      // end it, not queued in the server to act after its caller is gone.
      receipt = await whenMemoryFree(name!, start);
    }
    if (json) printJson(receipt);
    else {
      process.stdout.write(receiptText(receipt));
      if (receipt.state !== 'ready')
        process.stdout.write(
          `the ${receipt.state === 'waking' ? 'wake' : 'start'} runs in the background; run \`capyctl list ` +
            `deployments\` until it shows ready\n`,
        );
    }
    return exitCodes.ok;
  },
});
