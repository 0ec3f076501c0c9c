/**
 * A thousand requests arriving at once for a parked model (issue 14): the gateway reports one demand
 * whatever the crowd, the scheduler plans one switch, and the model wakes exactly once; every
 * request is answered by that one woken instance. The wake begins on the host as the scheduler starts
 * the switch, and the switch's own wake step joins it: still one wake of the engine.
 */
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stepOf } from '../deploy/demo/switchHistory.js';
import type { SimState } from '../simulator/engine.js';
import { findSwitchReceipt, listSwitchReceipts } from '../store/switchReceipts.js';
import { workflowIds } from '../workflows/definitions.js';
import { type SchedulerBench, startSchedulerBench } from './support/scheduler.js';

const REQUESTS = 1_000;

describe('a thousand concurrent requests for a parked model', () => {
  let s: SchedulerBench;
  let model: string;

  beforeAll(async () => {
    s = await startSchedulerBench({
      gpuMemory: '8GiB',
      hostYaml: `resource_policy: { queue: { max_pending_per_deployment: ${REQUESTS}, max_pending_total: ${REQUESTS} } }`,
      settings: { admissionWindowMs: 1 },
    });
    // A wake long enough that the switch's own wake step reaches the host while the early one runs.
    model = await s.deployMeasured('storm', '', ['--sim-wake-ms', '1500']);
    await s.command('start', { deploymentId: model, evict: false });
    await s.command('park', { deploymentId: model });
    await s.until(model, 'parked');
  });
  afterAll(() => s?.close());

  /** The engine's wakes, and the wake requests it received (a second ask of the same wake would show). */
  const wakesSoFar = async () => {
    const res = await request(`${s.lc.host.engineUrl({ deploymentId: model, instanceIndex: 0 })}/sim/state`);
    const { wakes, wake_requests } = (await res.body.json()) as SimState;
    return { wakes, wake_requests };
  };

  it('are all served by one wake, begun on the host as the switch starts', { timeout: 120_000 }, async () => {
    const stepsBefore = s.lc.gateway.steps.length;
    const wakesBefore = await wakesSoFar();
    const answers = await Promise.all(Array.from({ length: REQUESTS }, () => s.lc.gateway.request(model)));

    const served = answers.filter((a) => a.kind === 'served');
    expect(answers.filter((a) => a.kind === 'error')).toEqual([]);
    expect(served).toHaveLength(REQUESTS);
    // One instance, one generation: the one the wake brought back.
    expect(new Set(served.map((a) => JSON.stringify(a.instance)))).toEqual(
      new Set([JSON.stringify({ deploymentId: model, instanceIndex: 0, generation: 1 })]),
    );
    const starts = s.lc.gateway.steps.slice(stepsBefore).filter((x) => x.step === 'startWaiters');
    expect(starts).toHaveLength(1);
    const receipt = await findSwitchReceipt(s.lc.db, starts[0]!.switchId);
    expect(receipt).toMatchObject({ targetDeploymentId: model, outcome: 'released', victims: [] });
    // Every switch that ever targeted it: the first start, and this one wake.
    expect(await listSwitchReceipts(s.lc.db, { targetDeploymentId: model })).toHaveLength(2);
    expect((await s.settledLedger()).entries.find((e) => e.deploymentId === model)).toMatchObject({ state: 'ready' });
    expect(await wakesSoFar()).toEqual({ wakes: wakesBefore.wakes + 1, wake_requests: wakesBefore.wake_requests + 1 });

    // The scheduler scheduled the wake in the workflow task that started the switch; the switch's own
    // wake step, in its history as ever, joined it.
    const switchId = starts[0]!.switchId;
    const scheduler = (await s.lc.client.workflow.getHandle(workflowIds.hostScheduler(s.lc.hostId)).fetchHistory())
      .events!;
    const childStart = scheduler.find(
      (e) => e.startChildWorkflowExecutionInitiatedEventAttributes?.workflowId === workflowIds.switch(switchId),
    )!.startChildWorkflowExecutionInitiatedEventAttributes!;
    const wakes = scheduler
      .filter((e) => stepOf(e) === 'wakeEngine')
      .map((e) => e.activityTaskScheduledEventAttributes!);
    expect(wakes.map((w) => String(w.workflowTaskCompletedEventId))).toEqual([
      String(childStart.workflowTaskCompletedEventId),
    ]);
    const switchHistory = (await s.lc.client.workflow.getHandle(workflowIds.switch(switchId)).fetchHistory()).events!;
    expect(switchHistory.filter((e) => e.activityTaskCompletedEventAttributes).length).toBe(1);
    expect(switchHistory.filter((e) => stepOf(e) === 'wakeEngine')).toHaveLength(1);
  });
});
