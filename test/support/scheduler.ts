/**
 * The host scheduler on the lifecycle's bench: the gateway's demand reports wired to it, commands
 * sent as the management API sends them, its ledger read with its query, and the waits the tests need.
 */
import { CapyError } from '../../domain/catalogue.js';
import {
  type CommandArgs,
  type CommandResult,
  type Commands,
  reportDemand,
  type SchedulerRef,
  sendCommand,
  startMeasurement,
} from '../../gateway/lifecycleClient.js';
import { latestInOrder } from '../../gateway/demandReports.js';
import { queries, workflowIds } from '../../workflows/definitions.js';
import type { CommandReceipt, HostLedger, LedgerEntry, SwitchResult } from '../../api/lifecycle.js';
import type { SchedulerSettings } from '../../workflows/hostScheduler/input.js';
import { type Lifecycle, type LifecycleOptions, simDeployment, startLifecycle } from './lifecycle.js';

/** Short bounds, so a test sees every step within seconds; the idle timers off unless asked. */
export const testSchedulerSettings: SchedulerSettings = {
  admissionWindowMs: 100,
  drainMs: 5_000,
  wakeWindowMs: 15_000,
  startMs: 30_000,
  readyIdleMs: null,
  parkedIdleMs: null,
};

export interface SchedulerBench {
  lc: Lifecycle;
  ref: SchedulerRef;
  /** Deploys a simulator model (`extra`: more simulator flags) and waits for its checkpoint's measurement; returns its ID. */
  deployMeasured(name: string, more?: string, extra?: string[], engine?: string): Promise<string>;
  /** A command as the management API sends it; a start is followed to the end of its switch, as `start --wait` does. */
  command<K extends keyof Commands>(update: K, ...args: CommandArgs<K>): Promise<CommandResult<K>>;
  ledger(): Promise<HostLedger>;
  entry(deploymentId: string): Promise<LedgerEntry | undefined>;
  /** The ledger once no switch runs (a switch releases its waiters before it records its receipt). */
  settledLedger(): Promise<HostLedger>;
  /** Polls the ledger until `deploymentId`'s entry is in `state`. */
  until(deploymentId: string, state: LedgerEntry['state'], timeoutMs?: number): Promise<LedgerEntry>;
  close(): Promise<void>;
}

export async function startSchedulerBench(
  options: LifecycleOptions & { settings?: Partial<SchedulerSettings> } = {},
): Promise<SchedulerBench> {
  const late: { lc?: Lifecycle; ref?: SchedulerRef } = {};
  const lc = await startLifecycle({
    ...options,
    // The gateway reports from its own callbacks; a lost report would be a lost demand, so it is logged.
    onDemand: latestInOrder(
      (demand) => reportDemand(late.lc!.client, late.ref!, demand),
      (e) => console.error('demand report failed', e),
    ),
  });
  const ref: SchedulerRef = {
    hostId: lc.hostId,
    serverTaskQueue: lc.serverTaskQueue,
    settings: { ...testSchedulerSettings, ...options.settings },
  };
  Object.assign(late, { lc, ref });
  const handle = () => lc.client.workflow.getHandle(workflowIds.hostScheduler(lc.hostId));
  const ledger = () => handle().query(queries.ledger);
  const entry = async (id: string) => (await ledger()).entries.find((e) => e.deploymentId === id);

  /** A start's receipt as its switch ended, once the scheduler has taken the result into its ledger. */
  async function switched(receipt: CommandReceipt): Promise<CommandReceipt> {
    if (receipt.switchId === undefined || receipt.state === 'ready') return receipt;
    const result: SwitchResult = await lc.client.workflow.getHandle(workflowIds.switch(receipt.switchId)).result();
    while ((await ledger()).runningSwitchId === receipt.switchId) await new Promise((r) => setTimeout(r, 50));
    if (result.error && result.target?.state !== 'ready') throw new CapyError(result.error);
    const victims = result.victims
      .filter((v) => v.deploymentId !== receipt.deploymentId)
      .map(({ deploymentId, instanceIndex, released, gpuIndexes }) => ({
        deploymentId,
        instanceIndex,
        released,
        gpuIndexes,
      }));
    return { ...receipt, victims, state: result.target?.state ?? receipt.state };
  }

  return {
    lc,
    ref,
    async deployMeasured(name, more = '', extra = [], engine = 'vllm') {
      const d = await lc.deploy(simDeployment(name, engine, extra, more));
      const measuring = await startMeasurement(lc.client, {
        deploymentId: d.id,
        revision: d.revision,
        hostId: lc.hostId,
        serverTaskQueue: lc.serverTaskQueue,
      });
      await measuring.result();
      return d.id;
    },
    async command(update, ...args) {
      const receipt = await sendCommand(lc.client, ref, update, ...args);
      // CommandResult<'start'> is a CommandReceipt; TypeScript does not narrow K by the comparison.
      return (update === 'start' ? await switched(receipt as CommandReceipt) : receipt) as typeof receipt;
    },
    ledger,
    entry,
    async settledLedger() {
      for (;;) {
        const l = await ledger();
        if (l.runningSwitchId === null) return l;
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    async until(id, state, timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const e = await entry(id).catch(() => undefined);
        if (e?.state === state) return e;
        if (Date.now() > deadline) throw new Error(`${id} did not become ${state}; it is ${e?.state ?? 'absent'}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    },
    close: () => lc.close(),
  };
}

/** The catalogue's error a refused command carried. */
export async function refusal(p: Promise<unknown>): Promise<CapyError['apiError']> {
  try {
    await p;
  } catch (e) {
    if (e instanceof CapyError) return e.apiError;
    throw e;
  }
  throw new Error('the command was not refused');
}

export const released = (r: CommandReceipt) => r.victims.map((v) => `${v.deploymentId} ${v.released}`);
