/**
 * The gateway's steps on every server that shares the store (store/servers.ts): the requests wait
 * and run in each server's memory, so a switch's window and drain count them on every server, and
 * the start, reopening and failure of its waiters reach every server. The worker running the workflow
 * does each instant step at once, as a local activity (nothing added to its waiters' clock), and
 * says which server it is; every other registered server then does it as an activity on its own
 * task queue. One server alone (the standalone) adds no step. A server that does not take its step
 * within `SERVER_STEP_TIMEOUT_MS` is gone, and so are its requests: it holds the switch no longer
 * than that.
 */
import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  isCancellation,
  log,
  patched,
  proxyActivities,
  proxyLocalActivities,
  type ActivityOptions,
} from '@temporalio/workflow';
import { gatewayFailureTypes } from '../api/gatewayFailures.js';
import type { DrainOutcome, GatewaySteps, RanOn, WindowThenRelease } from '../activities/gatewaySteps.js';
import { HEARTBEAT_TIMEOUT_MS } from '../api/heartbeat.js';
import { SERVER_STEP_TIMEOUT_MS, serverStepOptions } from './definitions.js';

/** Room for a gateway step to be scheduled and answer on top of the time it is asked to wait. */
const GATEWAY_MARGIN_MS = 10_000;
export const RETRY: ActivityOptions['retry'] = {
  initialInterval: '250ms',
  backoffCoefficient: 2,
  maximumInterval: '2s',
};

type InstantStep = 'withdrawVictims' | 'reopen' | 'startWaiters' | 'failWaiters';
/** The `patched()` name of the window run inside the workflow task; older histories scheduled it. */
const WINDOW_IN_WORKFLOW_TASK = 'window-in-workflow-task';
type WaitStep = 'closeAdmission' | 'awaitDrain';

/** A registered server's step that failed: the server is gone, or going; a cancellation is the workflow's. */
export const serverGone = (taskQueue: string, step: string) => (e: unknown) => {
  if (isCancellation(e) || !(e instanceof ActivityFailure)) throw e;
  log.warn('a server did not take its gateway step; its requests are gone with it', {
    taskQueue,
    step,
    error: String(e),
  });
  return null;
};

/** Another server's gateway, as activities on its own queue; one that does not take a step in time is gone. */
export const gatewayOn = (taskQueue: string) =>
  proxyActivities<GatewaySteps>({
    taskQueue,
    scheduleToStartTimeout: SERVER_STEP_TIMEOUT_MS,
    startToCloseTimeout: SERVER_STEP_TIMEOUT_MS,
    retry: RETRY,
  });

/**
 * `servers`: the task queues of the live servers, as the store lists them (read once per switch).
 * None listed (a worker that registers no server: the lifecycle's tests) leaves the gateway steps to
 * `ownQueue`, the queue the workflow runs on.
 */
export function everyGateway(ownQueue: string, servers: Promise<string[]>) {
  const local = proxyLocalActivities<Pick<GatewaySteps, InstantStep>>(serverStepOptions);
  const waitAt = (taskQueue: string, waitsMs: number, registered: boolean) =>
    proxyActivities<Pick<GatewaySteps, WaitStep>>({
      taskQueue,
      startToCloseTimeout: waitsMs + GATEWAY_MARGIN_MS,
      ...(registered ? { scheduleToStartTimeout: SERVER_STEP_TIMEOUT_MS } : {}),
      heartbeatTimeout: HEARTBEAT_TIMEOUT_MS,
      retry: RETRY,
    });

  /**
   * The instant step here at once, then on every other registered server; the local answer is
   * returned. It runs whole even when the workflow is cancelled: it changes what serves, and a
   * gateway left halfway (waiters neither started nor failed) would answer nobody.
   */
  function instant<K extends InstantStep>(
    step: K,
    input: Parameters<GatewaySteps[K]>[0],
  ): Promise<Awaited<ReturnType<GatewaySteps[K]>>> {
    type Call = (i: typeof input) => Promise<Awaited<ReturnType<GatewaySteps[K]>> & RanOn>;
    return CancellationScope.nonCancellable(async () => {
      const [here, queues] = await Promise.all([(local[step] as Call)(input), servers]);
      await Promise.all(
        queues
          .filter((q) => q !== here.ranOn)
          .map((q) => (gatewayOn(q)[step] as Call)(input).catch(serverGone(q, step))),
      );
      return here;
    });
  }

  /** A waiting step on every server at once; drained once every server that answered is. */
  async function wait<K extends WaitStep>(
    step: K,
    waitsMs: number,
    input: Parameters<GatewaySteps[K]>[0],
  ): Promise<DrainOutcome> {
    type Call = (i: typeof input) => Promise<DrainOutcome>;
    const queues = await servers;
    if (queues.length === 0) return (waitAt(ownQueue, waitsMs, false)[step] as Call)(input);
    const answered = (
      await Promise.all(queues.map((q) => (waitAt(q, waitsMs, true)[step] as Call)(input).catch(serverGone(q, step))))
    ).filter((o): o is DrainOutcome => o !== null);
    const requestsStillRunning = answered.reduce((sum, o) => sum + o.requestsStillRunning, 0);
    return {
      drained: requestsStillRunning === 0,
      requestsStillRunning,
      cutBeforeOutput: [...new Set(answered.flatMap((o) => o.cutBeforeOutput))],
    };
  }

  /**
   * With one gateway, this worker's (one server, or none registered), the window is a local step
   * like the instant ones: nothing is scheduled between the switch's start and its park. A worker
   * of a server not yet registered may take the task: that gateway refuses, and the registered one
   * waits as an activity on its own queue. Given the victims' `releaseRows`, the local step begins
   * their release too once they drained (`WindowThenRelease`: `released`).
   */
  async function closeAdmission(
    input: Parameters<GatewaySteps['closeAdmission']>[0],
    releaseRows?: Parameters<WindowThenRelease['closeAdmissionThenRelease']>[0]['rows'],
  ): Promise<DrainOutcome & { released: boolean }> {
    const queues = await servers;
    if (queues.length <= 1 && patched(WINDOW_IN_WORKFLOW_TASK)) {
      const options = { ...serverStepOptions, startToCloseTimeout: (input.windowMs ?? 0) + GATEWAY_MARGIN_MS };
      const here = { ...input, onlyOn: queues[0] };
      try {
        if (releaseRows)
          return await proxyLocalActivities<WindowThenRelease>(options).closeAdmissionThenRelease({
            ...here,
            rows: releaseRows,
          });
        const closed = await proxyLocalActivities<Pick<GatewaySteps, 'closeAdmission'>>(options).closeAdmission(here);
        return { ...closed, released: false };
      } catch (e) {
        const refused = e instanceof ActivityFailure && e.cause instanceof ApplicationFailure;
        if (!refused || (e.cause as ApplicationFailure).type !== gatewayFailureTypes.notThisServer) throw e;
      }
    }
    return { ...(await wait('closeAdmission', input.windowMs ?? 0, input)), released: false };
  }

  return {
    closeAdmission,
    awaitDrain: (input: Parameters<GatewaySteps['awaitDrain']>[0]) => wait('awaitDrain', input.timeoutMs, input),
    withdrawVictims: (input: Parameters<GatewaySteps['withdrawVictims']>[0]) => instant('withdrawVictims', input),
    reopen: (input: Parameters<GatewaySteps['reopen']>[0]) => instant('reopen', input),
    startWaiters: (input: Parameters<GatewaySteps['startWaiters']>[0]) => instant('startWaiters', input),
    failWaiters: (input: Parameters<GatewaySteps['failWaiters']>[0]) => instant('failWaiters', input),
  };
}
