/**
 * A deployment's last problem, where the operator looks (`status`, `list`, the status page): an engine
 * that exited unasked, or a start, park or wake that failed, in the words of what failed. Beside it, how
 * many times its engine ended unasked (its restarts: a request starts it again) and whether it keeps doing
 * so. A crash loop is a condition shown beside the state, as kubectl's CrashLoopBackOff beside a pod's
 * phase: the spec's states stay as they are (the model is `stopped`).
 */
import { z } from 'zod';
import type { InstanceState } from './vocabulary.js';

export const problemKinds = z.enum(['engine_exited', 'start_failed', 'park_failed', 'wake_failed']);
export type ProblemKind = z.infer<typeof problemKinds>;

/** One problem, as the store keeps it and the API sends it. */
export const problemBody = z.object({
  kind: problemKinds,
  at: z.iso.datetime(),
  host_id: z.string(),
  instance_index: z.number().int(),
  generation: z.number().int(),
  /** What happened, one paragraph: how the engine ended, or the error of the step that failed. */
  message: z.string(),
  /** An exited engine's exit code; null when a signal ended it. */
  exit_code: z.number().int().nullable().optional(),
  signal: z.string().nullable().optional(),
  /** An exited engine's last lines of stderr, why in its own words. */
  stderr: z.array(z.string()).optional(),
});
export type Problem = z.infer<typeof problemBody>;

/**
 * Endings that count as a restart: the engine ended without being asked (it exited, or its start
 * failed). A failed park or wake is followed by a stop capyctl asked for.
 */
export const endsEngine = (kind: ProblemKind): boolean => kind === 'engine_exited' || kind === 'start_failed';

/**
 * "Keeps exiting": this many unasked endings within the window. Restarts do not back off: a request
 * for a model that is not explicit starts it again (spec), and the crash loop is what the operator sees.
 */
export const CRASH_LOOP = { endings: 3, withinMs: 10 * 60_000 } as const;

/** A deployment in a crash loop: not ready, and its last `CRASH_LOOP.endings` unasked endings within the window. */
export function crashLooping(recentEndings: readonly Date[], state: InstanceState, nowMs: number): boolean {
  if (state === 'ready' || recentEndings.length < CRASH_LOOP.endings) return false;
  const oldest = recentEndings.slice(-CRASH_LOOP.endings)[0]!;
  return nowMs - oldest.getTime() <= CRASH_LOOP.withinMs;
}

/** How an engine ended, as messages say it: `code 1`, `signal SIGKILL`. */
export const exitHow = (code: number | null, signal: string | null): string =>
  signal !== null ? `signal ${signal}` : `code ${code}`;

/**
 * An engine's last lines of stderr: about the last screen of it, a Python traceback's tail and the
 * line before it; blank lines left out.
 */
export const STDERR_LINES = 20;
export const lastStderrLines = (tail: string): string[] =>
  tail
    .split('\n')
    .filter((l) => l.trim() !== '')
    .slice(-STDERR_LINES);
