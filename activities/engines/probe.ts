/**
 * The wake check's question, asked through the OpenAI-compatible routes every engine serves: a
 * greedy completion of a fixed prompt, or a decision model's first token with its probabilities.
 */
import { z } from 'zod';
import type { CallOptions, EngineEndpoint, Probe, ProbeAnswer } from '../../engines/engine.js';
import { fetchJson } from './http.js';

const completion = z.object({ choices: z.array(z.object({ text: z.string() })).min(1) });

const tokenLogprob = z.object({ token: z.string(), logprob: z.number() });
const decisionCompletion = z.object({
  choices: z
    .array(
      z.object({
        message: z.object({ content: z.string().nullable() }),
        logprobs: z.object({ content: z.array(tokenLogprob.extend({ top_logprobs: z.array(tokenLogprob) })).min(1) }),
      }),
    )
    .min(1),
});

/**
 * The most alternatives OpenAI-compatible servers return per token (vLLM's default `max_logprobs`).
 * Asking for all of them rather than one per option keeps an option from being crowded out by its
 * own spelling variants (`yes`, ` yes`, `Yes`).
 */
const TOP_LOGPROBS = 20;

/** The decision a model's first token makes: each option's probability, and the likeliest option. */
export function decide(
  options: readonly string[],
  alternatives: readonly z.output<typeof tokenLogprob>[],
  sampled: string,
): ProbeAnswer {
  const probabilities: Record<string, number> = {};
  for (const option of options) {
    // Tokens that spell the option with a leading space or newline are the same choice.
    const matching = alternatives.filter((a) => a.token.trim() === option);
    probabilities[option] = matching.reduce((sum, a) => sum + Math.exp(a.logprob), 0);
  }
  const likeliest = options.reduce((best, o) => (probabilities[o]! > probabilities[best]! ? o : best), options[0]!);
  // A first token that spells no option is the answer as given: it cannot equal a first answer that did.
  const option = probabilities[likeliest]! > 0 ? likeliest : sampled.trim();
  return { kind: 'decision', option, probabilities };
}

function withoutTopK(knobs: Readonly<Record<string, number>>): Record<string, number> {
  const { top_k: _cut, ...rest } = knobs;
  return rest;
}

/**
 * `determinism`: every knob the engine has that pins its answer (engines/contracts.ts): `temperature: 0`,
 * and `seed` and `top_k: 1` where it takes them, so an engine that samples at temperature 0 still
 * answers the same twice.
 */
export async function askProbe(
  endpoint: EngineEndpoint,
  probe: Probe,
  determinism: Readonly<Record<string, number>>,
  options: CallOptions = {},
): Promise<ProbeAnswer> {
  const { signal } = options;
  if (probe.kind === 'prompt') {
    const json = {
      model: endpoint.model,
      prompt: probe.prompt,
      max_tokens: probe.maxTokens,
      ...determinism,
      stream: false,
    };
    const answer = await fetchJson(endpoint, '/v1/completions', completion, { method: 'POST', json, signal });
    return { kind: 'prompt', text: answer.choices[0]!.text };
  }
  const json = {
    model: endpoint.model,
    messages: [{ role: 'user', content: probe.prompt }],
    max_tokens: 1,
    // Not top_k: it would cut the alternatives whose probabilities the check compares. The decision
    // is the likeliest option by those probabilities, whatever token was sampled.
    ...withoutTopK(determinism),
    logprobs: true,
    top_logprobs: Math.max(TOP_LOGPROBS, probe.options.length),
    stream: false,
  };
  const answer = await fetchJson(endpoint, '/v1/chat/completions', decisionCompletion, {
    method: 'POST',
    json,
    signal,
  });
  const choice = answer.choices[0]!;
  const first = choice.logprobs.content[0]!;
  const alternatives = [first, ...first.top_logprobs.filter((a) => a.token !== first.token)];
  return decide(probe.options, alternatives, choice.message.content ?? first.token);
}
