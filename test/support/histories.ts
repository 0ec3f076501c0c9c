/** Reading a workflow's history as the Web UI shows it: each step by its activity type. */
import type { temporal } from '@temporalio/proto';

type Event = temporal.api.history.v1.IHistoryEvent;

/** The activity a local activity's marker records (the SDK writes its details as JSON); none for other events. */
export function localActivityType(e: Event): string | undefined {
  const payload = e.markerRecordedEventAttributes?.details?.data?.payloads?.[0];
  return payload?.data ? (JSON.parse(Buffer.from(payload.data).toString('utf8')) as { activity_type?: string }).activity_type : undefined;
}

/** The step an event begins, remote (scheduled) or local (its marker); none for other events. */
export const stepOf = (e: Event): string | undefined => e.activityTaskScheduledEventAttributes?.activityType?.name ?? localActivityType(e);
