/**
 * Deterministic greedy answers: the same (model, prompt) always gives the same words, so a wake
 * check can compare an answer with the first one. A `salt` stands for weights that came back
 * different (the wrong_answer_after_wake fault).
 */
import { createHash } from 'node:crypto';

export interface TokenAlternative {
  token: string;
  logprob: number;
}

/** One generated token with its log-probability and the alternatives a client may ask for. */
export interface Token extends TokenAlternative {
  /** Best first; the token itself is among them. */
  alternatives: TokenAlternative[];
}

export interface Answer {
  tokens: Token[];
  /** `stop` when the model ended on its own before max_tokens. */
  finishReason: 'stop' | 'length';
}

const vocabulary = (
  'the a capybara rests by warm water while gentle rivers carry quiet leaves across green valleys ' +
  'and every engine wakes when morning light finds the patient herd under tall reeds near stone ' +
  'bridges where small birds sing of distant hills soft rain clear skies old roads bright fields'
).split(' ');

/** A small fast generator seeded from a hash: the same seed gives the same sequence everywhere. */
function sequence(...parts: string[]): () => number {
  const digest = createHash('sha256').update(parts.join('\u0000')).digest();
  let a = digest.readUInt32LE(0);
  let b = digest.readUInt32LE(4);
  let c = digest.readUInt32LE(8);
  let d = digest.readUInt32LE(12) | 1;
  // xorshift128: uniform in [0, 1).
  return () => {
    const t = a ^ (a << 11);
    a = b;
    b = c;
    c = d;
    d = (d ^ (d >>> 19) ^ (t ^ (t >>> 8))) >>> 0;
    return d / 2 ** 32;
  };
}

/** A plain model's greedy answer: exactly `maxTokens` words. */
export function answerText(model: string, prompt: string, salt: string, maxTokens: number, topK: number): Answer {
  const next = sequence(model, salt, prompt);
  const tokens: Token[] = [];
  for (let i = 0; i < maxTokens; i++) {
    const pick = Math.floor(next() * vocabulary.length);
    const logprob = -next() * 0.5;
    const word = vocabulary[pick]!;
    const token = i === 0 ? word : ` ${word}`;
    const alternatives: TokenAlternative[] = [{ token, logprob }];
    for (let k = 1; k < topK; k++) {
      const other = vocabulary[(pick + k) % vocabulary.length]!;
      alternatives.push({ token: i === 0 ? other : ` ${other}`, logprob: logprob - k - next() });
    }
    tokens.push({ token, logprob, alternatives });
  }
  return { tokens, finishReason: 'length' };
}

/** What a model computes with garbage weights: no error, just "!!!!". */
export function garbageText(maxTokens: number): Answer {
  const token = { token: '!', logprob: 0, alternatives: [{ token: '!', logprob: 0 }] };
  return { tokens: Array.from({ length: maxTokens }, () => token), finishReason: 'length' };
}

/**
 * A decision model's answer: one token, the likeliest option, with every option among the
 * alternatives. A non-empty salt shifts the probabilities one option along, so the chosen option
 * changes whenever there are two or more.
 */
export function decide(
  model: string,
  prompt: string,
  salt: string,
  options: readonly string[],
  maxTokens: number,
): Answer {
  const next = sequence(model, prompt);
  const scores = options.map(() => Math.exp(3 * next()));
  const total = scores.reduce((sum, s) => sum + s, 0);
  const shift = salt === '' ? 0 : 1;
  const alternatives = options
    .map((token, i) => ({ token, logprob: Math.log(scores[(i + shift) % options.length]! / total) }))
    .sort((x, y) => y.logprob - x.logprob);
  return { tokens: [{ ...alternatives[0]!, alternatives }], finishReason: maxTokens === 1 ? 'length' : 'stop' };
}

/** Prompt tokens as the usage block counts them: whitespace-separated words, at least one. */
export function countPromptTokens(prompt: string): number {
  return Math.max(1, prompt.split(/\s+/).filter((w) => w !== '').length);
}
