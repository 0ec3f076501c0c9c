/**
 * The spans of a workflow's history that make up a step's cost: how long an activity task waited to
 * be picked up (scheduled → started), ran (started → completed), and how long the workflow task that
 * follows took to be picked up and to finish.
 */
import type { temporal } from '@temporalio/proto';
import { eventMs } from '../../deploy/demo/switchHistory.js';

type History = temporal.api.history.v1.IHistory;

export function spansOf(history: History): Record<string, number[]> {
  const events = history.events ?? [];
  const at = new Map(events.map((e) => [Number(e.eventId), eventMs(e)]));
  const spans: Record<string, number[]> = {};
  const add = (k: string, v: number) => (spans[k] ??= []).push(v);
  for (const e of events) {
    const t = eventMs(e);
    if (e.activityTaskStartedEventAttributes)
      add('activity pickup', t - at.get(Number(e.activityTaskStartedEventAttributes.scheduledEventId))!);
    if (e.activityTaskCompletedEventAttributes)
      add('activity run', t - at.get(Number(e.activityTaskCompletedEventAttributes.startedEventId))!);
    if (e.workflowTaskStartedEventAttributes)
      add('wft pickup', t - at.get(Number(e.workflowTaskStartedEventAttributes.scheduledEventId))!);
    if (e.workflowTaskCompletedEventAttributes)
      add('wft run', t - at.get(Number(e.workflowTaskCompletedEventAttributes.startedEventId))!);
  }
  return spans;
}
