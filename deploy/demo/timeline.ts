/** The demo's observed timeline: the clients' view and the switches' histories, in the spec's words. */
import type { SwitchSeen } from './switchHistory.js';
import type { DemoRun } from './twoApps.js';

export interface TimelineEvent {
  /** Seconds since App 2 sent its requests (the example's 0 s). */
  atS: number;
  what: string;
}

const seconds = (ms: number, zeroMs: number) => Math.round((ms - zeroMs) / 10) / 100;

export function timelineOf(run: DemoRun, switches: readonly SwitchSeen[]): TimelineEvent[] {
  const at = (ms: number) => seconds(ms, run.zeroMs);
  const events: TimelineEvent[] = [];
  const app2 = run.requests.filter((r) => r.app === 2);
  events.push({ atS: 0, what: `App 2 sends ${app2.length} requests for ${app2[0]?.model}; they wait` });

  for (const s of switches) {
    const verb = s.steps.some((x) => x.step === 'woke') ? 'wake' : 'start';
    events.push({
      atS: at(s.startedAtMs),
      what: `switch begins (${s.switchId}): ${verb} ${s.target}, release ${s.victims.join(', ')}`,
    });
    const closed = s.steps.find((x) => x.step === 'admission closed')?.atMs;
    const admitted = run.requests.filter(
      (r) =>
        r.app === 1 && r.status === 200 && r.sentAtMs >= s.startedAtMs && closed !== undefined && r.sentAtMs < closed,
    );
    if (admitted.length > 0)
      events.push({
        atS: at(admitted[0]!.sentAtMs),
        what: `${s.victims.join(', ')} still takes App 1's new requests (the admission window): ${admitted.length} taken`,
      });
    for (const step of s.steps) {
      const whose = ['woke', 'started', 'released its waiters'].includes(step.step) ? s.target : s.victims.join(', ');
      events.push({ atS: at(step.atMs), what: `${whose} ${step.step}` });
    }
  }

  const refused = run.requests.filter((r) => r.status === 503);
  if (refused.length > 0) {
    const [first, last] = [refused[0]!, refused[refused.length - 1]!];
    events.push({
      atS: at(first.endedAtMs),
      what: `App 1's requests answered 503 (${first.error}): ${refused.length}, from ${at(first.endedAtMs)} s to ${at(last.endedAtMs)} s`,
    });
  }
  const answered = app2.filter((r) => r.firstOutputAtMs !== null).map((r) => r.firstOutputAtMs!);
  if (answered.length > 0) {
    events.push({
      atS: at(Math.min(...answered)),
      what: `App 2's ${answered.length} requests answered together, within ${Math.max(...answered) - Math.min(...answered)} ms`,
    });
  }
  // App 1's requests sent once chat-a began parking waited instead of a 503, and became the switch back.
  const beganParking = switches[0]?.steps.find((x) => x.step === 'began parking')?.atMs;
  const waited = run.requests.filter(
    (r) => r.app === 1 && r.status === 200 && beganParking !== undefined && r.sentAtMs >= beganParking,
  );
  const firstServed = Math.min(...waited.map((r) => r.firstOutputAtMs ?? Number.POSITIVE_INFINITY));
  if (waited.length > 0)
    events.push({
      atS: at(firstServed),
      what: `App 1's ${waited.length} requests sent after chat-a began parking waited, and are answered after the switch back`,
    });
  return events.sort((a, b) => a.atS - b.atS);
}

export function renderTimeline(events: readonly TimelineEvent[]): string {
  const width = Math.max(...events.map((e) => `${e.atS.toFixed(2)} s`.length));
  return [
    `${'TIME'.padEnd(width)}   WHAT HAPPENS`,
    ...events.map((e) => `${`${e.atS.toFixed(2)} s`.padStart(width)}   ${e.what}`),
  ].join('\n');
}
