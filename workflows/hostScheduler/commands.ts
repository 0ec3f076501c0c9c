/**
 * The operator's commands on one host (updates from the management API): start, preinitialize,
 * park, stop, delete and a host drain. Each runs in its turn, or is refused; none waits for memory.
 */
import { apiErrors } from '../../domain/catalogue.js';
import { releasingLine } from '../../engines/rules.js';
import type { CommandReceipt, VictimPlan } from '../../api/lifecycle.js';
import { refusal } from '../refusal.js';
import type { GpuHolder, HostScheduler, MeasuredView } from './scheduler.js';
import type { Command } from './jobs.js';

/** Answers a command's caller before the command has finished (a start or a park as its switch begins). */
type AnswerEarly = (receipts: CommandReceipt[]) => void;

/** The receipts a command ends with; null when it answered early and has nothing more to say. */
type Ending = Promise<CommandReceipt[] | null>;

const operatorStop: VictimPlan = { kind: 'stop', reason: 'operator' };

/** Runs `command` on the scheduler's host. */
export function runCommand(scheduler: HostScheduler, command: Command, answerEarly: AnswerEarly): Ending {
  switch (command.kind) {
    case 'start':
      return start(scheduler, command, answerEarly);
    case 'preinitialize':
      return preinitialize(scheduler, command.deploymentId);
    case 'park':
      return park(scheduler, command.deploymentId, answerEarly);
    case 'stop':
    case 'delete':
      return stopOrDelete(scheduler, command.deploymentId, command.kind);
    case 'drainHost':
      return drainHost(scheduler);
  }
}

/**
 * The names of the models other than `deploymentId` holding GPU memory: what a refused start or
 * preinitialize waits for.
 */
const otherHolderNames = (holders: readonly GpuHolder[], deploymentId: string) =>
  holders.filter((h) => h.entry.deploymentId !== deploymentId).map((h) => h.name);

async function start(
  scheduler: HostScheduler,
  { deploymentId, evict, instanceIndex }: Extract<Command, { kind: 'start' }>,
  answerEarly: AnswerEarly,
): Ending {
  const [deployment, holders] = await Promise.all([scheduler.readMeasured(deploymentId), scheduler.gpuHolders()]);
  // Un-stopped before its switch begins: a request sent once the switch has ended finds it startable.
  const unstop = () => scheduler.store.setOperatorStopped({ deploymentId: deployment.id, stopped: false });
  // The receipt answers as the switch begins, naming it and its victims, after every refusal
  // was decided: whatever the start does, its caller has seen it begin, and `--wait` follows it.
  const brought = await scheduler.bringUp(deployment, holders, {
    evict,
    instanceIndex,
    admissionWindowMs: null,
    beforeSwitch: unstop,
    begun: ({ switchId, target, victims }) =>
      answerEarly([
        {
          deploymentId: deployment.id,
          switchId,
          victims: victims.map(({ instance, plan, gpuIndexes = [] }) => ({
            deploymentId: instance.deploymentId,
            instanceIndex: instance.instanceIndex,
            released: releasingLine(plan),
            gpuIndexes,
          })),
          state: target.action === 'wake' ? 'waking' : 'starting',
        },
      ]),
  });
  // A start does not wait here for memory: it would act later for a caller that may be gone.
  // It is refused, retryably; `start --wait` asks again until the memory is free.
  if (brought.kind === 'waits')
    throw refusal(
      (evict ? apiErrors.memoryBusy : apiErrors.memoryHeld)(deployment.id, otherHolderNames(holders, deployment.id)),
    );
  if (brought.kind === 'switched') return null;
  await unstop();
  return [scheduler.receipt(deployment.id)];
}

async function preinitialize(scheduler: HostScheduler, deploymentId: string): Ending {
  const [deployment, holders] = await Promise.all([scheduler.readMeasured(deploymentId), scheduler.gpuHolders()]);
  if (scheduler.entryOf(deployment.id)?.state === 'parked') return [scheduler.receipt(deployment.id)];
  // Its own instance here, parked next: a preinitialize does not add instances.
  const brought = await scheduler.bringUp(deployment, holders, {
    evict: false,
    instanceIndex: scheduler.entryOf(deployment.id)?.instance.instanceIndex ?? 0,
    admissionWindowMs: null,
  });
  // Refused, retryably, as a start is: queued, it would act later for a caller that may be gone.
  if (brought.kind === 'waits')
    throw refusal(apiErrors.memoryHeldToPreinitialize(deployment.id, otherHolderNames(holders, deployment.id)));
  const failed = brought.kind === 'switched' ? scheduler.targetFailed(brought.result, deployment.id) : undefined;
  if (failed) throw failed;
  return [
    scheduler.receipt(deployment.id, await scheduler.takeAway(deployment, scheduler.howToRelease(deployment, true))),
  ];
}

async function park(scheduler: HostScheduler, deploymentId: string, answerEarly: AnswerEarly): Ending {
  const deployment = await scheduler.readMeasured(deploymentId);
  if (scheduler.entryOf(deployment.id)?.state !== 'ready') return [scheduler.receipt(deployment.id)];
  // Parking runs in the background (spec, "Park and wake"): the receipt answers once the
  // switch has begun, after every refusal was decided, and names it.
  const plan = scheduler.howToRelease(deployment, true);
  const state = plan.kind === 'park' ? 'parking' : 'stopping';
  await scheduler.takeAway(deployment, plan, (switchId) =>
    answerEarly([{ deploymentId: deployment.id, switchId, victims: [], state }]),
  );
  return null;
}

/** A stop, or a delete: the instance stops if it serves or is parked, and its requests stop waiting. */
async function stopOrDelete(scheduler: HostScheduler, deploymentId: string, kind: 'stop' | 'delete'): Ending {
  const deployment = await scheduler.readDeployment(deploymentId);
  const result = scheduler.readyOrParked(deployment.id)
    ? await scheduler.takeAway(deployment as MeasuredView, operatorStop)
    : undefined;
  scheduler.dropDemandsFor(deployment.id);
  if (kind === 'stop') {
    await scheduler.store.setOperatorStopped({ deploymentId: deployment.id, stopped: true });
    return [scheduler.receipt(deployment.id, result)];
  }
  const receipt = scheduler.receipt(deployment.id, result);
  await scheduler.store.deleteDeployment({ deploymentId: deployment.id });
  scheduler.forget(deployment.id);
  return [{ ...receipt, state: 'stopped' }];
}

/** A host drain stops every instance on the host, in one switch. */
async function drainHost(scheduler: HostScheduler): Ending {
  const entries = scheduler.ledger.entries.filter((e) => scheduler.readyOrParked(e.deploymentId));
  if (entries.length === 0) return [];
  const views = (await Promise.all(entries.map((e) => scheduler.readDeployment(e.deploymentId)))) as MeasuredView[];
  const result = await scheduler.stopAll(entries, views, operatorStop);
  return entries.map((e) => ({ ...scheduler.receipt(e.deploymentId, result), victims: [] }));
}
