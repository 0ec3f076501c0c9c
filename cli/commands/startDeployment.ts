/**
 * `capyctl start deployment NAME [--evict] [--wait]`. Without `--evict` a start never parks anything:
 * it waits for memory. `--wait` first waits for the checkpoint measurement (without it, an unmeasured
 * checkpoint is refused), then for ready, saying what it waits for and for how long.
 */
import type { DeploymentBody, ReceiptBody } from '../../gateway/management/deployments.js';
import { exitCodes } from '../command.js';
import type { ManagementClient } from '../managementClient.js';
import { operatorCommand, printJson } from '../operatorCommand.js';
import { receiptText } from '../receipt.js';

const MEASUREMENT_POLL_MS = 250;

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
    await new Promise((r) => setTimeout(r, MEASUREMENT_POLL_MS));
  }
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
      receipt = await waitingFor(`${name} to be ready`, start);
    } else receipt = await start();
    if (json) printJson(receipt);
    else process.stdout.write(receiptText(receipt));
    return exitCodes.ok;
  },
});
