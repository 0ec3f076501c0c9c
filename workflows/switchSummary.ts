/** The one line the Web UI shows for a switch: "wake chat-b, park chat-a on gpu-box". Pure. */
import type { SwitchInput } from '../api/lifecycle.js';

export function switchSummary(input: Pick<SwitchInput, 'target' | 'victims' | 'hostId'>): string {
  const steps = [
    ...(input.target ? [`${input.target.action} ${input.target.name}`] : []),
    ...input.victims.map((v) => `${v.plan.kind} ${v.name}`),
  ];
  return `${steps.length > 0 ? steps.join(', ') : 'nothing'} on ${input.hostId}`;
}
