/**
 * The engine activities a host agent runs on its task queue `host-<hostId>`: the groups in `host/`,
 * each built from the host's parts it needs, composed into the one object the worker registers (its
 * keys are the activities' names, which recorded histories hold). Built by a factory, so tests and
 * the standalone wire the same code.
 */
import { engineLifecycleActivities } from './host/lifecycle.js';
import { probeActivities } from './host/probes.js';
import type { HostActivityDeps } from './host/shared.js';
import { wakeActivities } from './host/wakes.js';
import { ReleaseBoard } from './releaseBoard.js';

export type { LaunchInput } from './host/lifecycle.js';
export type { RunningEngine } from './host/probes.js';
export type { WakeAfter, WakeResult } from './host/wakes.js';

export function createHostActivities(deps: HostActivityDeps) {
  // What a switch's parks and stops say of their victims' memory, and its wake waits to hear.
  const releases = new ReleaseBoard();
  return {
    ...engineLifecycleActivities(deps, releases),
    ...probeActivities(deps),
    ...wakeActivities(deps, releases),
  };
}

export type HostActivities = ReturnType<typeof createHostActivities>;
