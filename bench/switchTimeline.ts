/**
 * One request-driven switch as a timeline: the points a request passes from its arrival to its
 * first byte, read from the scheduler's and the switch's histories and the gateway's own record.
 * bench/switchControlPlane.ts prints the median of each span between consecutive points.
 */
import type { Client } from '@temporalio/client';
import { eventMs } from '../deploy/demo/switchHistory.js';
import { workflowIds } from '../workflows/definitions.js';

/** Each point's name says what has happened by then; the span before it is what it took. */
export const TIMELINE = [
  'request sent',
  'demand signal recorded by the scheduler',
  'wake begun with the switch (no victim; newer switches only)',
  'switch workflow started (scheduler decided)',
  'wake begun with the switch picked up by the host',
  "switch's first workflow task picked up",
  'window step scheduled',
  'window closed',
  'drain step scheduled (only when requests ran as the window closed)',
  'gateway drained',
  'park scheduled (release begun, parking row written; the wake too in newer switches)',
  'park done (the engine finished its requests, then parked)',
  'wake scheduled (parked and waking rows written; older switches only)',
  'wake begun with the switch done (its completion in the scheduler)',
  'wake and check done',
  'waiters released (local steps)',
  'first byte to the client',
] as const;
export type Point = (typeof TIMELINE)[number];

export interface SwitchMoments {
  sentAtMs: number;
  switchId: string;
  waitersStartedAtMs: number;
  servedAtMs: number;
}

/** The timeline of one switch; a point its histories do not show (an older design's) is absent. */
export async function switchTimeline(
  client: Client,
  hostId: string,
  m: SwitchMoments,
): Promise<Partial<Record<Point, number>>> {
  const [scheduler, child] = await Promise.all([
    client.workflow.getHandle(workflowIds.hostScheduler(hostId)).fetchHistory(),
    client.workflow.getHandle(workflowIds.switch(m.switchId)).fetchHistory(),
  ]);
  const events = child.events ?? [];
  const scheduled = new Map<string, string>();
  const points: Partial<Record<Point, number>> = { 'request sent': m.sentAtMs };
  const demand = (scheduler.events ?? []).find(
    (e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'demand' && eventMs(e) >= m.sentAtMs - 5,
  );
  if (demand) points['demand signal recorded by the scheduler'] = eventMs(demand);
  // A wake with no victim is scheduled by the scheduler, in the task that starts the switch.
  const started = (scheduler.events ?? []).find(
    (e) => e.startChildWorkflowExecutionInitiatedEventAttributes?.workflowId === workflowIds.switch(m.switchId),
  );
  const taskOf = (e: (typeof events)[number]) =>
    String(
      (e.startChildWorkflowExecutionInitiatedEventAttributes ?? e.activityTaskScheduledEventAttributes)
        ?.workflowTaskCompletedEventId,
    );
  const wakeAhead = (scheduler.events ?? []).find(
    (e) =>
      e.activityTaskScheduledEventAttributes?.activityType?.name === 'wakeEngine' &&
      started &&
      taskOf(e) === taskOf(started),
  );
  if (wakeAhead) {
    points['wake begun with the switch (no victim; newer switches only)'] = eventMs(wakeAhead);
    const ofIt = (e: (typeof events)[number]) =>
      (e.activityTaskStartedEventAttributes ?? e.activityTaskCompletedEventAttributes)?.scheduledEventId?.toString() ===
      String(wakeAhead.eventId);
    const [picked, done] = (scheduler.events ?? []).filter(ofIt);
    if (picked) points['wake begun with the switch picked up by the host'] = eventMs(picked);
    if (done) points['wake begun with the switch done (its completion in the scheduler)'] = eventMs(done);
  }
  points['switch workflow started (scheduler decided)'] = eventMs(events[0]!);
  const firstTask = events.find((e) => e.workflowTaskStartedEventAttributes);
  if (firstTask) points["switch's first workflow task picked up"] = eventMs(firstTask);
  const at: Record<string, Point[]> = {
    closeAdmission: ['window step scheduled', 'window closed'],
    awaitDrain: ['drain step scheduled (only when requests ran as the window closed)', 'gateway drained'],
    parkEngine: [
      'park scheduled (release begun, parking row written; the wake too in newer switches)',
      'park done (the engine finished its requests, then parked)',
    ],
    wakeEngine: ['wake scheduled (parked and waking rows written; older switches only)', 'wake and check done'],
  };
  for (const e of events) {
    const name = e.activityTaskScheduledEventAttributes?.activityType?.name;
    if (name) {
      scheduled.set(String(e.eventId), name);
      const p = at[name]?.[0];
      if (p && points[p] === undefined) points[p] = eventMs(e);
    }
    const done = e.activityTaskCompletedEventAttributes;
    const p = done && at[scheduled.get(String(done.scheduledEventId)) ?? '']?.[1];
    if (p) points[p] = eventMs(e);
  }
  // A wake scheduled beside the park is no point of its own: its span then runs from the park's end.
  const wakeScheduled = 'wake scheduled (parked and waking rows written; older switches only)';
  if ((points[wakeScheduled] ?? Infinity) < (points['park done (the engine finished its requests, then parked)'] ?? 0))
    delete points[wakeScheduled];
  points['waiters released (local steps)'] = m.waitersStartedAtMs;
  points['first byte to the client'] = m.servedAtMs;
  return points;
}
