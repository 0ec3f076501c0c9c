/**
 * The wake check (spec, "Park and wake"): the fixed question an instance answers when it first
 * becomes ready, and the comparison after a wake that tells whether its weights came back intact.
 * Pure: the switch workflow imports it.
 */
import type { Probe, ProbeAnswer } from '../engines/engine.js';
import { DECISION_PROBABILITY_TOLERANCE } from '../domain/limits.js';
import type { DeploymentSpec } from '../settings/deploymentDocument.js';
import type { SwitchTarget, WakeReference } from '../api/lifecycle.js';

/** Asked greedily (temperature 0), so intact weights give the same text every time. */
export const WAKE_CHECK_PROMPT = 'Count from one to ten in words, separated by commas:';
/** Enough tokens that damaged weights show, few enough to keep the check well inside the wake window. */
export const WAKE_CHECK_MAX_TOKENS = 16;

/** The question for a deployment: its fixed decision for a decision model, else the fixed prompt. */
export function probeFor(spec: DeploymentSpec): Probe {
  if (spec.decision) return { kind: 'decision', prompt: spec.decision.prompt, options: [...spec.decision.options] };
  return { kind: 'prompt', prompt: WAKE_CHECK_PROMPT, maxTokens: WAKE_CHECK_MAX_TOKENS };
}

/**
 * What a wake of `t` is checked against: its first answer, when that is its generation's. Only vLLM
 * and SGLang are checked (TensorFold never parks). `unchecked`: it should be, and has no first answer.
 * The switch and the scheduler's early wake ask the same question of the same wake.
 */
export function wakeQuestion(
  t: SwitchTarget,
  first: WakeReference | null,
): { reference: WakeReference | null; probe?: Probe; unchecked: boolean } {
  const checked = t.spec.engine === 'vllm' || t.spec.engine === 'sglang';
  const reference = checked && first?.generation === t.instance.generation ? first : null;
  return { reference, ...(reference ? { probe: reference.probe as Probe } : {}), unchecked: checked && !reference };
}

/**
 * Null when `now` is the answer `first` was; 'wake_mismatch' otherwise. A decision passes when it
 * picks the same option with every probability within the tolerance of the first answer's; an
 * option one answer lists and the other does not counts as probability 0 there.
 */
export function compareAnswers(first: ProbeAnswer, now: ProbeAnswer): null | 'wake_mismatch' {
  if (first.kind === 'prompt' && now.kind === 'prompt') return first.text === now.text ? null : 'wake_mismatch';
  if (first.kind === 'decision' && now.kind === 'decision') {
    if (first.option !== now.option) return 'wake_mismatch';
    const options = new Set([...Object.keys(first.probabilities), ...Object.keys(now.probabilities)]);
    for (const o of options) {
      if (Math.abs((first.probabilities[o] ?? 0) - (now.probabilities[o] ?? 0)) > DECISION_PROBABILITY_TOLERANCE)
        return 'wake_mismatch';
    }
    return null;
  }
  return 'wake_mismatch';
}
