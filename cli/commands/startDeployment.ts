/**
 * `capyctl start deployment NAME [--evict] [--wait]`. The API answers as the start's switch begins,
 * with the switch and its victims; the start runs in the background. Without `--evict` a start never
 * parks anything: while other models hold its memory the API refuses it, and the command asks again
 * until the memory is free (it waits for memory, and nothing acts once it is ended). `--wait` first waits for the checkpoint measurement (without it, an unmeasured
 * checkpoint is refused), then follows the switch until the model is ready, saying what it waits for
 * and for how long, and prints the receipt as the switch ended.
 */
import type { DeploymentBody, ReceiptBody } from '../../gateway/management/deployments.js';
import type { SwitchBody } from '../../gateway/management/switches.js';
import { exitCodes } from '../command.js';
import { ApiRefusal, type ManagementClient } from '../managementClient.js';
import { operatorCommand, printJson } from '../operatorCommand.js';
import { receiptText } from '../receipt.js';

const MEASUREMENT_POLL_MS = 250;
const SWITCH_POLL_MS = 250;
/** How often `--wait` asks again while other models hold the memory. */
const MEMORY_POLL_MS = 1_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)}s`;

/**
 * Runs `work` while telling the operator what it waits for: on a terminal one line that counts the
 * seconds, else a plain line when it begins and one when it ends. On stderr: stdout is the receipt.
 */
async function waitingFor<T>(what: string, work: () => Promise<T>): Promise<T> {
  const started = Date.now();
  const terminal = process.stderr.isTTY === true;
  const show = () => process.stderr.write(`\r\x1b[Kwaiting for ${what}… ${seconds(Date.now() - started)}`);
  let ticker: NodeJS.Timeout | undefined;
  if (terminal) {
    show();
    ticker = setInterval(show, 1000);
  } else process.stderr.write(`waiting for ${what}\n`);
  try {
    return await work();
  } finally {
    clearInterval(ticker);
    process.stderr.write(`${terminal ? '\r\x1b[K' : ''}waited ${seconds(Date.now() - started)} for ${what}\n`);
  }
}

/** Until it is measured, or its measurement failed: the start then says why it is refused. */
async function untilMeasured(api: ManagementClient, ref: string): Promise<void> {
  while ((await api.call<DeploymentBody>('GET', `/deployments/${ref}`)).checkpoint === 'measuring') {
    await sleep(MEASUREMENT_POLL_MS);
  }
}

/** A start refused while other models hold the memory it needs: it may go once they free it. */
const memoryHeld = (e: unknown) => e instanceof ApiRefusal && e.code === 'insufficient_capacity' && e.retryable;

/** Until the start is taken: asked again while its memory is held. */
async function startTaken(start: () => Promise<ReceiptBody>): Promise<ReceiptBody> {
  for (;;) {
    try {
      return await start();
    } catch (e) {
      if (!memoryHeld(e)) throw e;
      await sleep(MEMORY_POLL_MS);
    }
  }
}

/** Follows the start's switch until it ends: the receipt as it ended, or the error its target got. */
async function untilSwitched(api: ManagementClient, receipt: ReceiptBody): Promise<ReceiptBody> {
  if (receipt.switch_id === undefined || receipt.state === 'ready') return receipt;
  let switched: SwitchBody;
  while ((switched = await api.call<SwitchBody>('GET', `/switches/${receipt.switch_id}`)).outcome === 'running') await sleep(SWITCH_POLL_MS);
  const { error, target } = switched;
  if (error && target?.state !== 'ready') throw new ApiRefusal(0, error.code, error.message, error.retryable);
  const victims = switched.victims.filter((v) => v.deployment_id !== receipt.deployment_id);
  return { ...receipt, victims, state: target?.state ?? receipt.state };
}

export const startDeployment = operatorCommand({
  words: ['start', 'deployment'],
  summary: 'start (or wake) a model; --evict may park others to make room, --wait waits for its measurement and ready',
  positionals: ['NAME'],
  options: { evict: { type: 'boolean' }, wait: { type: 'boolean' } },
  flagsUsage: '[--evict] [--wait]',
  example: 'capyctl start deployment other-model --evict --wait',
  async run({ api, args: [name], flags, json }) {
    const ref = encodeURIComponent(name!);
    const start = () => api.call<ReceiptBody>('POST', `/deployments/${ref}/start`, { evict: flags.evict === true });
    let receipt: ReceiptBody;
    if (flags.wait === true) {
      const d = await api.call<DeploymentBody>('GET', `/deployments/${ref}`);
      if (d.checkpoint === 'measuring') await waitingFor(`the checkpoint measurement of ${name}`, () => untilMeasured(api, ref));
      receipt = await waitingFor(`${name} to be ready`, async () => untilSwitched(api, await startTaken(start)));
    } else {
      // Without --evict a start waits for memory (spec): here, where the operator sees it and can
      // end it, not queued in the server to act after its caller is gone.
      receipt = await start().catch((e: unknown) => {
        if (!memoryHeld(e)) throw e;
        return waitingFor(`GPU memory for ${name} (${(e as ApiRefusal).apiMessage.split(';')[0]})`, () => startTaken(start));
      });
    }
    if (json) printJson(receipt);
    else {
      process.stdout.write(receiptText(receipt));
      if (receipt.state !== 'ready') process.stdout.write(`the ${receipt.state === 'waking' ? 'wake' : 'start'} runs in the background; run \`capyctl list deployments\` until it shows ready\n`);
    }
    return exitCodes.ok;
  },
});
