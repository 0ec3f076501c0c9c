/** The OpenAI JSON of one request's replies, chat or text, streamed or whole, as vLLM writes it. */
import { randomUUID } from 'node:crypto';
import type { Token } from './answers.js';
import { frame } from './stream.js';

export type Kind = 'chat' | 'text';

/** What of a request shapes its replies. */
export interface ShapeOptions {
  kind: Kind;
  /** As the request named it. */
  model: string;
  logprobs: boolean;
  topLogprobs: number;
}

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

/** Stands for a token's text while a chunk is rendered once as a template. */
const TEXT_MARK = '\u0000text\u0000';

/** One request's replies; the id and creation time are the same in each. */
export class Shapes {
  private readonly id: string;
  private readonly created = Math.floor(Date.now() / 1000);
  private tokenTemplate: [before: string, after: string] | undefined;

  constructor(private readonly g: ShapeOptions) {
    this.id = `${g.kind === 'chat' ? 'chatcmpl' : 'cmpl'}-${randomUUID().replace(/-/g, '')}`;
  }

  /** A chat stream's first chunk: the assistant role, no content yet. Text streams have none. */
  opening(): unknown | undefined {
    return this.g.kind === 'chat' ? this.chunk({ role: 'assistant', content: '' }, null, null) : undefined;
  }

  /**
   * A token's frame. Chunks without logprobs or a finish reason differ only in the token's text, so
   * the rest is rendered once: stringifying each chunk whole was most of the simulator's cost at
   * high token rates.
   */
  tokenFrame(token: Token, finishReason: string | null): string {
    if (finishReason !== null || this.g.logprobs) return frame(this.tokenChunk(token, finishReason));
    if (!this.tokenTemplate) {
      const [before, after] = frame(this.tokenChunk({ token: TEXT_MARK, logprob: 0, alternatives: [] }, null)).split(
        JSON.stringify(TEXT_MARK),
      );
      this.tokenTemplate = [before!, after!];
    }
    return this.tokenTemplate[0] + JSON.stringify(token.token) + this.tokenTemplate[1];
  }

  /** One token's chunk; the last one carries the finish reason. */
  tokenChunk(token: Token | undefined, finishReason: string | null): unknown {
    if (this.g.kind === 'text') {
      return this.envelope('text_completion', [
        { index: 0, text: token?.token ?? '', logprobs: null, finish_reason: finishReason, stop_reason: null },
      ]);
    }
    return this.chunk({ content: token?.token ?? '' }, this.logprobs(token ? [token] : []), finishReason);
  }

  /** With `stream_options.include_usage`: a chunk with no choices, before `[DONE]`. */
  usageChunk(usage: Usage): unknown {
    return {
      ...(this.envelope(this.g.kind === 'chat' ? 'chat.completion.chunk' : 'text_completion', []) as object),
      usage,
    };
  }

  /** A whole non-streamed reply. */
  full(tokens: readonly Token[], finishReason: string, usage: Usage): unknown {
    const text = tokens.map((t) => t.token).join('');
    const choice =
      this.g.kind === 'chat'
        ? {
            index: 0,
            message: { role: 'assistant', content: text, tool_calls: [] },
            logprobs: this.logprobs(tokens),
            finish_reason: finishReason,
            stop_reason: null,
          }
        : { index: 0, text, logprobs: null, finish_reason: finishReason, stop_reason: null };
    return {
      ...(this.envelope(this.g.kind === 'chat' ? 'chat.completion' : 'text_completion', [choice]) as object),
      usage,
    };
  }

  /** The chunk that ends a choice also says which stop string ended it, as vLLM's does: none here. */
  private chunk(delta: unknown, logprobs: unknown, finishReason: string | null): unknown {
    const ending = finishReason === null ? {} : { stop_reason: null };
    return this.envelope('chat.completion.chunk', [
      { index: 0, delta, logprobs, finish_reason: finishReason, ...ending },
    ]);
  }

  private envelope(object: string, choices: unknown[]): unknown {
    return { id: this.id, object, created: this.created, model: this.g.model, choices };
  }

  /** Chat logprobs as OpenAI writes them; null unless asked for. */
  private logprobs(tokens: readonly Token[]): unknown {
    if (!this.g.logprobs) return null;
    const entry = (t: { token: string; logprob: number }) => ({
      token: t.token,
      logprob: t.logprob,
      bytes: [...Buffer.from(t.token)],
    });
    return {
      content: tokens.map((t) => ({
        ...entry(t),
        // A word has top_logprobs alternatives; a decision model lists every option, its whole vocabulary.
        top_logprobs: this.g.topLogprobs === 0 ? [] : t.alternatives.map(entry),
      })),
    };
  }
}
