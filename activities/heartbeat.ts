/** Activities that wait heartbeat: Temporal's cancellation (and a dead worker's detection) rides on it. */
import { Context } from '@temporalio/activity';
import { HEARTBEAT_EVERY_MS } from '../api/heartbeat.js';

/** Runs `work` with the activity's cancellation signal, heartbeating every second until it settles. */
export async function whileHeartbeating<T>(
  work: (signal: AbortSignal) => Promise<T>,
  details?: () => unknown,
): Promise<T> {
  const ctx = Context.current();
  // A local activity (the window, with one gateway) has no heartbeat: its worker is the workflow's.
  if (ctx.info.isLocal) return work(ctx.cancellationSignal);
  ctx.heartbeat(details?.());
  const timer = setInterval(() => ctx.heartbeat(details?.()), HEARTBEAT_EVERY_MS);
  try {
    return await work(ctx.cancellationSignal);
  } finally {
    clearInterval(timer);
  }
}
