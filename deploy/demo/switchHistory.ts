/**
 * What the Temporal history of each switch says happened, and when: the moments the spec's example
 * names (the admission window closing, the drain, the park, the wake or start, the waiters' start), read
 * from the completion of the switch's activities, remote ones by their completion and local ones
 * (the server's own steps) by their marker, written as the workflow task that ran them completed.
 */
import type { Client } from '@temporalio/client';
import type { temporal } from '@temporalio/proto';
import type { SwitchInput } from '../../api/lifecycle.js';

/** A switch step, by the activity whose completion marks it. */
const STEPS: Readonly<Record<string, string>> = {
  closeAdmission: 'admission closed',
  awaitDrain: 'drained',
  withdrawVictims: 'began parking',
  // The window's step, which also began the victims' release when they had drained (its `released`).
  closeAdmissionThenRelease: 'admission closed',
  parkEngine: 'parked',
  stopEngine: 'stopped',
  wakeEngine: 'woke',
  awaitEngineReady: 'started',
  startWaiters: 'released its waiters',
};

export interface SwitchSeen {
  switchId: string;
  target: string | null;
  victims: string[];
  startedAtMs: number;
  /** Each step, in order, when its activity completed. */
  steps: Array<{ step: string; atMs: number }>;
}

type Event = temporal.api.history.v1.IHistoryEvent;

/** One of a local activity's marker's details (the SDK writes them as JSON); none for other events. */
function markerDetail(e: Event, key: 'data' | 'result'): unknown {
  const payload = e.markerRecordedEventAttributes?.details?.[key]?.payloads?.[0];
  return payload?.data ? JSON.parse(Buffer.from(payload.data).toString('utf8')) : undefined;
}

/** The activity a local activity's marker records; none for other events. */
export const localActivityType = (e: Event): string | undefined =>
  (markerDetail(e, 'data') as { activity_type?: string } | undefined)?.activity_type;

/** What a local activity answered, as its marker records it. */
const localActivityResult = (e: Event): unknown => markerDetail(e, 'result');

/** The step an event begins, remote (scheduled) or local (its marker); none for other events. */
export const stepOf = (e: Event): string | undefined =>
  e.activityTaskScheduledEventAttributes?.activityType?.name ?? localActivityType(e);

/** When an event was recorded, in ms since the epoch. */
export const eventMs = (e: Event): number =>
  Number(e.eventTime?.seconds ?? 0) * 1000 + Math.round((e.eventTime?.nanos ?? 0) / 1e6);

/** The switches on `hostId` that began at or after `sinceMs`, oldest first. */
export async function switchesSince(client: Client, hostId: string, sinceMs: number): Promise<SwitchSeen[]> {
  const seen: SwitchSeen[] = [];
  const query = `WorkflowType = 'switchWorkflow' AND CapyHost = '${hostId}' AND StartTime >= '${new Date(sinceMs).toISOString()}'`;
  for await (const w of client.workflow.list({ query })) {
    const history = await client.workflow.getHandle(w.workflowId, w.runId).fetchHistory();
    const events = history.events ?? [];
    const scheduled = new Map<string, string>();
    const steps: SwitchSeen['steps'] = [];
    let input: SwitchInput | undefined;
    for (const e of events) {
      if (e.workflowExecutionStartedEventAttributes) {
        const payload = e.workflowExecutionStartedEventAttributes.input?.payloads?.[0]?.data;
        input = payload ? (JSON.parse(Buffer.from(payload).toString('utf8')) as SwitchInput) : undefined;
      }
      const s = e.activityTaskScheduledEventAttributes;
      if (s?.activityType?.name) scheduled.set(String(e.eventId), s.activityType.name);
      const done = e.activityTaskCompletedEventAttributes;
      const name = (done ? scheduled.get(String(done.scheduledEventId)) : localActivityType(e)) ?? '';
      const step = STEPS[name];
      if (step) steps.push({ step, atMs: eventMs(e) });
      if (name === 'closeAdmissionThenRelease' && (localActivityResult(e) as { released?: boolean })?.released)
        steps.push({ step: STEPS.withdrawVictims!, atMs: eventMs(e) });
    }
    seen.push({
      switchId: w.workflowId,
      target: input?.target?.name ?? null,
      victims: input?.victims.map((v) => v.name) ?? [],
      // When the scheduler decided it: the admission window counts from then, a little before the
      // workflow itself starts (more so on a busy machine).
      startedAtMs: input?.startedAtMs ?? w.startTime.getTime(),
      steps,
    });
  }
  return seen.sort((a, b) => a.startedAtMs - b.startedAtMs);
}
