/**
 * A parked engine woken and asked the wake check, in one step on the host: after its switch's
 * victims gave their memory back when the wake is scheduled beside their parks (`ReleaseBoard`), and
 * once per switch however many ask (`SwitchWakes`).
 */
import { ApplicationFailure } from '@temporalio/common';
import type { ParkTier } from '../../domain/vocabulary.js';
import type { Probe, ProbeAnswer } from '../../engines/engine.js';
import { hostFailureTypes } from '../../api/hostFailures.js';
import { whileHeartbeating } from '../heartbeat.js';
import type { ReleaseBoard } from '../releaseBoard.js';
import type { InstanceKey, SupervisedEngine } from '../supervisor.js';
import { SwitchWakes } from '../switchWakes.js';
import { askEngine } from './probes.js';
import { asFailure, type HostActivityDeps, runningEngine, versionRequests, warnFor } from './shared.js';

/**
 * A wake scheduled beside its switch's parks (one round trip through Temporal fewer): it begins once
 * every victim's park or stop for `switchId` gave its memory back, and the wake window runs from then.
 */
export interface WakeAfter {
  switchId: string;
  victims: InstanceKey[];
  wakeWindowMs: number;
}

/**
 * A wake's answer: the wake check's (`null` without a probe) and how long the wake and the check
 * took on the host. `victimsKept`: a victim kept its memory (its engine still ran requests), so
 * nothing was woken.
 */
export interface WakeResult {
  answer: ProbeAnswer | null;
  checkMs: number;
  wakeMs?: number;
  victimsKept?: true;
}

type WakeDeps = Pick<HostActivityDeps, 'supervisor' | 'logger'>;

/** `signal`, also aborted by `bound` when there is one. */
const boundedBy = (signal: AbortSignal, bound: AbortSignal | undefined) =>
  bound ? AbortSignal.any([signal, bound]) : signal;

/** Wakes `engine` from `tier` unless it is awake, then asks it `probe`; `signal` bounds both. */
async function wakeAndAsk(
  deps: WakeDeps,
  engine: SupervisedEngine,
  input: { key: InstanceKey; tier: ParkTier; probe?: Probe },
  signal: AbortSignal,
): Promise<WakeResult> {
  const began = Date.now();
  if (engine.stage !== 'ready') {
    engine.stage = 'waking';
    await engine.adapter
      .wake(engine.endpoint, input.tier, versionRequests(engine), { signal, warn: warnFor(deps.logger, input.key) })
      .catch(asFailure);
    engine.stage = 'ready';
  }
  const wakeMs = Date.now() - began;
  if (!input.probe) return { answer: null, checkMs: 0, wakeMs };
  const answer = await askEngine(engine, input.probe, signal);
  return { answer, checkMs: Date.now() - began - wakeMs, wakeMs };
}

/** `releases`: where the parks and stops of a switch's victims say what they did with their memory. */
export function wakeActivities(deps: WakeDeps, releases: ReleaseBoard) {
  const wakes = new SwitchWakes<WakeResult>();

  /** No GPU memory held by `victim` on this host: its engine is parked, or no engine of its generation runs. */
  const holdsNothing = (victim: InstanceKey) => {
    const engine = deps.supervisor.live(victim);
    return !engine || engine.key.generation !== victim.generation || engine.stage === 'parked';
  };

  return {
    /**
     * Wakes from `tier` and, given the wake check's `probe`, asks it at once: one step on the host
     * for both (each step is a round trip through Temporal). The workflow bounds the two with the
     * wake window (then: wake_uncertain) and compares the answer; `checkMs` is the check's share.
     * Given `after`, it first waits for the switch's victims, and bounds itself with the wake window.
     * Given `switchId`, the engine wakes once for that switch, however many ask (`SwitchWakes`).
     */
    async wakeEngine(input: {
      key: InstanceKey;
      tier: ParkTier;
      probe?: Probe;
      after?: WakeAfter;
      switchId?: string;
    }): Promise<WakeResult> {
      const { after, switchId } = input;
      if (after) {
        // A victim that holds nothing here now has nothing to say: a host agent that restarted lost
        // its engines, and with them the words their parks or stops said before.
        const holding = after.victims.filter((victim) => !holdsNothing(victim));
        const release = await whileHeartbeating((signal) => releases.heard(after.switchId, holding, signal));
        if (release === 'kept') return { answer: null, checkMs: 0, victimsKept: true };
      }
      const window = after && AbortSignal.timeout(after.wakeWindowMs);
      try {
        const engine = runningEngine(deps.supervisor, input.key);
        return await whileHeartbeating((signal) => {
          const bounded = boundedBy(signal, window);
          const wake = () => wakeAndAsk(deps, engine, input, bounded);
          return switchId === undefined ? wake() : wakes.once(switchId, engine, bounded, wake);
        });
      } catch (e) {
        if (!window?.aborted) throw e;
        throw ApplicationFailure.nonRetryable(
          `the wake of ${input.key.deploymentId}/${input.key.instanceIndex} did not finish within ${after!.wakeWindowMs} ms`,
          hostFailureTypes.wakeWindowOver,
        );
      }
    },
  };
}
