/**
 * The OpenAI routes every dialect serves — `/v1/chat/completions`, `/v1/completions`, `/v1/models` —
 * and a request's life in the engine: checked, waiting for a slot, prefill, paced tokens, aborted
 * when its client hangs up or the engine is told to.
 */
import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { type Answer, answerText, countPromptTokens, decide, garbageText, type Token } from './answers.js';
import type { Dialect } from './dialect.js';
import type { AbortCause, InFlightRequest, SimEngine } from './engine.js';
import type { SimTimings } from '../engines/simulatorArgs.js';
import { type Exchange, type Router, sendJson } from './http.js';
import { type Kind, type ShapeOptions, Shapes, type Usage } from './shapes.js';
import { EventStream, frame, paceTokens } from './stream.js';

interface Generation extends ShapeOptions {
  prompt: string;
  stream: boolean;
  includeUsage: boolean;
  maxTokens: number;
  rid: string | undefined;
  /** The sampling knobs a request may pin its answer with. */
  seed: number | undefined;
  topK: number | undefined;
}

/** A request the engine refuses, with the status the dialect's error JSON carries. */
class Refusal extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

const DEFAULT_MAX_TOKENS = 16;
/** vLLM's --max-logprobs default. */
const MAX_TOP_LOGPROBS = 20;

type Body = Record<string, unknown>;

function messageText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    return content
      .map((part: { type?: unknown; text?: unknown }) =>
        part?.type === 'text' && typeof part.text === 'string' ? part.text : '',
      )
      .join('');
  }
  throw new Refusal(400, 'each message needs a content string or a list of text parts');
}

function promptOf(kind: Kind, body: Body): string {
  if (kind === 'chat') {
    const messages = body.messages;
    if (!Array.isArray(messages) || messages.length === 0)
      throw new Refusal(400, '`messages` must be a non-empty list');
    return messages
      .map((m: { role?: unknown; content?: unknown }) => `${String(m?.role)}: ${messageText(m?.content)}`)
      .join('\n');
  }
  const prompt = body.prompt;
  if (typeof prompt === 'string') return prompt;
  if (Array.isArray(prompt) && prompt.length === 1 && typeof prompt[0] === 'string') return prompt[0];
  throw new Refusal(400, '`prompt` must be a string (the simulator answers one prompt per request)');
}

function positiveInteger(body: Body, key: string): number | undefined {
  const value = body[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1)
    throw new Refusal(400, `\`${key}\` must be a positive integer`);
  return value;
}

function parseGeneration(kind: Kind, body: unknown, engine: SimEngine): Generation {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw new Refusal(400, 'the body must be a JSON object');
  const b = body as Body;
  const served = engine.config.servedModelName;
  const model = b.model === undefined ? served : b.model;
  if (model !== served) throw new Refusal(404, `The model \`${String(model)}\` does not exist.`);
  const streamOptions = b.stream_options as { include_usage?: unknown } | undefined;
  const topLogprobs = b.top_logprobs ?? 0;
  if (
    typeof topLogprobs !== 'number' ||
    !Number.isInteger(topLogprobs) ||
    topLogprobs < 0 ||
    topLogprobs > MAX_TOP_LOGPROBS
  ) {
    throw new Refusal(400, `\`top_logprobs\` must be an integer from 0 to ${MAX_TOP_LOGPROBS}`);
  }
  const prompt = promptOf(kind, b);
  const maxTokens =
    positiveInteger(b, 'max_completion_tokens') ?? positiveInteger(b, 'max_tokens') ?? DEFAULT_MAX_TOKENS;
  const promptTokens = countPromptTokens(prompt);
  const { maxModelLen } = engine.config;
  if (promptTokens + maxTokens > maxModelLen) {
    throw new Refusal(
      400,
      `This model's maximum context length is ${maxModelLen} tokens. However, you requested ` +
        `${promptTokens + maxTokens} tokens ` +
        `(${promptTokens} in the messages, ${maxTokens} in the completion). Please reduce the length of the ` +
        `messages or completion.`,
    );
  }
  return {
    kind,
    model: served,
    prompt,
    stream: b.stream === true,
    includeUsage: streamOptions?.include_usage === true,
    maxTokens,
    logprobs: kind === 'chat' && b.logprobs === true,
    topLogprobs,
    rid: typeof b.rid === 'string' ? b.rid : undefined,
    seed: integer(b, 'seed'),
    topK: integer(b, 'top_k'),
  };
}

function integer(body: Body, key: string): number | undefined {
  const value = body[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value)) throw new Refusal(400, `\`${key}\` must be an integer`);
  return value;
}

/**
 * Under the ignores_temperature fault the engine samples whatever the temperature: `top_k: 1` is
 * still greedy, a `seed` repeats its draw, and anything else draws anew each time.
 */
function samplingNoise(engine: SimEngine, g: Generation): string {
  if (!engine.faults.ignores_temperature || g.topK === 1) return '';
  return g.seed === undefined ? randomUUID() : `seed ${g.seed}`;
}

/** The answer the engine computes now: garbage weights, a decision model's option, or words. */
function answerFor(engine: SimEngine, g: Generation): Answer {
  if (engine.answersGarbage) return garbageText(g.maxTokens);
  const { model, decisionOptions } = engine.config;
  if (decisionOptions) return decide(model, g.prompt, engine.answerSalt, decisionOptions, g.maxTokens);
  return answerText(model, g.prompt, engine.answerSalt + samplingNoise(engine, g), g.maxTokens, g.topLogprobs);
}

/** How long the engine reads the prompt before its first token. */
function prefillTimeMs(timings: SimTimings, prompt: string): number {
  const perToken = timings.prefillTokensPerS === undefined ? 0 : 1000 / timings.prefillTokensPerS;
  return timings.prefillMs + countPromptTokens(prompt) * perToken;
}

/** Resolves never; rejects when the request is aborted. */
function hangUntilAborted(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason), { once: true }));
}

/** One request's life in the engine, from arrival to its last byte. */
async function generate(engine: SimEngine, dialect: Dialect, res: ServerResponse, g: Generation): Promise<void> {
  const controller = new AbortController();
  const { signal } = controller;
  const request: InFlightRequest = { rid: g.rid, abort: (cause: AbortCause) => controller.abort(cause) };
  engine.inFlight.add(request);
  // Closing the connection aborts the request, streamed or not, as in every engine here.
  res.once('close', () => {
    if (!res.writableFinished) controller.abort('client' satisfies AbortCause);
  });

  const shapes = new Shapes(g);
  const stream = g.stream ? new EventStream(res, signal) : undefined;
  const opening = shapes.opening();
  const usage = (completion: number): Usage => {
    const prompt = countPromptTokens(g.prompt);
    return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
  };
  const { timings } = engine.config;
  let release: (() => void) | undefined;
  let answer: Answer | undefined;
  let produced = 0;
  try {
    if (stream && opening && dialect.roleChunkOnArrival) await stream.write(frame(opening));
    release = await engine.slots.acquire(signal);
    if (engine.faults.requests_never_finish) {
      if (stream && opening && !stream.isOpen) await stream.write(frame(opening));
      await hangUntilAborted(signal);
    }
    const prefillMs = prefillTimeMs(timings, g.prompt);
    if (prefillMs > 0) await sleep(prefillMs, undefined, { signal });
    const a = (answer = answerFor(engine, g));
    if (stream && engine.faults.streams_go_silent) {
      produced = 1;
      await stream.write((opening && !stream.isOpen ? frame(opening) : '') + shapes.tokenFrame(a.tokens[0]!, null));
      await hangUntilAborted(signal);
    }
    await paceTokens(a.tokens.length, timings.tokensPerS, signal, async (from, to) => {
      produced = to;
      if (!stream) return;
      let frames = opening && !stream.isOpen ? frame(opening) : '';
      for (let i = from; i < to; i++)
        frames += shapes.tokenFrame(a.tokens[i]!, i === a.tokens.length - 1 ? a.finishReason : null);
      await stream.write(frames);
    });
    finish(a.tokens, a.finishReason);
  } catch (e) {
    if (!signal.aborted) throw e;
    if (signal.reason === ('client' satisfies AbortCause)) {
      res.destroy(); // the client is gone: nothing to say
      return;
    }
    // Aborted by the engine (SGLang's /abort_request, a pause): the answer ends here, as SGLang ends it.
    finish(answer?.tokens.slice(0, produced) ?? [], 'abort', true);
  } finally {
    release?.();
    engine.inFlight.delete(request);
  }

  /** Ends the reply; a `cut` stream gets a chunk of its own for the finish reason, no token carrying it. */
  function finish(tokens: readonly Token[], finishReason: string, cut = false): void {
    if (!stream) return sendJson(res, 200, shapes.full(tokens, finishReason, usage(tokens.length)));
    let tail = '';
    if (cut) tail += frame(shapes.tokenChunk(undefined, finishReason));
    if (g.includeUsage) tail += frame(shapes.usageChunk(usage(tokens.length)));
    stream.end(tail);
  }
}

function modelList(engine: SimEngine, dialect: Dialect): unknown {
  const created = Math.floor(Date.now() / 1000);
  const { servedModelName, model, maxModelLen } = engine.config;
  return {
    object: 'list',
    data: [
      {
        id: servedModelName,
        object: 'model',
        created,
        owned_by: dialect.ownedBy,
        root: model,
        parent: null,
        max_model_len: maxModelLen,
        permission: [
          {
            id: `modelperm-${randomUUID().replace(/-/g, '')}`,
            object: 'model_permission',
            created,
            allow_create_engine: false,
            allow_sampling: true,
            allow_logprobs: true,
            allow_search_indices: false,
            allow_view: true,
            allow_fine_tuning: false,
            organization: '*',
            group: null,
            is_blocking: false,
          },
        ],
      },
    ],
  };
}

export function addOpenAiRoutes(router: Router, engine: SimEngine, dialect: Dialect): void {
  const inference =
    (kind: Kind) =>
    async ({ res, body }: Exchange) => {
      let g: Generation;
      try {
        g = parseGeneration(kind, body, engine);
        if (engine.state !== 'ready') {
          // A request to a parked engine has crashed real ones: refuse it loudly and record it.
          engine.violation(`a request reached the engine while it was ${engine.state}`);
          throw new Refusal(500, `the engine cannot serve while it is ${engine.state}`);
        }
      } catch (e) {
        if (!(e instanceof Refusal)) throw e;
        return sendJson(res, e.status, dialect.errorBody(e.status, e.message));
      }
      await generate(engine, dialect, res, g);
    };
  router
    .on('POST', '/v1/chat/completions', inference('chat'))
    .on('POST', '/v1/completions', inference('text'))
    .on('GET', '/v1/models', ({ res }) => sendJson(res, 200, modelList(engine, dialect)));
}
