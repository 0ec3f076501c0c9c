/**
 * What a switch's victims did with their GPU memory on this host, so that the switch's wake can be
 * scheduled beside its parks and begin the moment they end, without a round trip through Temporal
 * between them. A park or stop given the switch's id says the victim gave its memory back
 * (`released`); a park refused because the engine still ran requests says it keeps it (`kept`).
 * The wake waits for every victim's word: all released, it wakes; one kept, it does not.
 *
 * Kept in memory: a host agent that restarts has lost its engines too, so the parks fail, and the
 * switch's own compensation (stop the victim, which says released) still reaches the waiting wake.
 */
import type { InstanceKey } from './supervisor.js';
import { untilAborted } from './untilAborted.js';

export type VictimRelease = 'released' | 'kept';

/** A switch's record outlives any wake that could still ask for it (the longest park, stop and wake). */
const FORGET_AFTER_MS = 30 * 60_000;

const victimOf = (key: InstanceKey) => `${key.deploymentId}/${key.instanceIndex}/${key.generation}`;

interface Word {
  said?: VictimRelease;
  heard: Promise<VictimRelease>;
  resolve: (release: VictimRelease) => void;
}

export class ReleaseBoard {
  private readonly switches = new Map<string, Map<string, Word>>();

  /** The victim's word for `switchId`; the first said stands (a retried park says the same). */
  say(switchId: string, victim: InstanceKey, release: VictimRelease): void {
    const word = this.wordOf(switchId, victim);
    if (word.said !== undefined) return;
    word.said = release;
    word.resolve(release);
  }

  /** Released once every one of `victims` released for `switchId`; kept as soon as one keeps its memory. */
  heard(switchId: string, victims: readonly InstanceKey[], signal: AbortSignal): Promise<VictimRelease> {
    const words = victims.map((v) => this.wordOf(switchId, v).heard);
    const all = new Promise<VictimRelease>((resolve) => {
      let left = words.length;
      if (left === 0) resolve('released');
      for (const word of words)
        void word.then((release) => {
          if (release === 'kept') resolve('kept');
          else if (--left === 0) resolve('released');
        });
    });
    return untilAborted(all, signal);
  }

  private wordOf(switchId: string, victim: InstanceKey): Word {
    let words = this.switches.get(switchId);
    if (!words) {
      words = new Map();
      this.switches.set(switchId, words);
      setTimeout(() => this.switches.delete(switchId), FORGET_AFTER_MS).unref();
    }
    let word = words.get(victimOf(victim));
    if (!word) {
      let resolve!: (release: VictimRelease) => void;
      const heard = new Promise<VictimRelease>((r) => (resolve = r));
      word = { heard, resolve };
      words.set(victimOf(victim), word);
    }
    return word;
  }
}
