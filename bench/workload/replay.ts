/**
 * The open-loop replayer: sends a trace's requests on its own clock — a late answer never delays
 * the next arrival — to an OpenAI-compatible listener, and records for each request its first
 * token's time, its total time, its status and its error code.
 *
 * Each request is sent as OpenAI's SDKs send it: a refusal they retry (408, 409, 429, a 5xx or a
 * connection error) is sent again, up to `retries` times, after Retry-After or their backoff (0.5 s
 * doubling, at most 8 s, less up to a quarter at random); its times count from the first send.
 * With `retries: 0` every refusal is final.
 *
 * Times are kept in the trace's (real) milliseconds: played at `speed`, a request due at `at_ms` is
 * sent at `at_ms / speed`, the backoff is divided by `speed`, and what it measured is multiplied back.
 */
import { setMaxListeners } from 'node:events';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { Agent, request } from 'undici';
import { Random } from './random.js';
import type { TraceRequest } from './trace.js';

export interface RequestResult {
  model: string;
  stream: boolean;
  /** When it was due, in trace ms. */
  atMs: number;
  /** How late the replayer sent it, in its own (bench) ms. */
  lateMs: number;
  /** The last attempt's HTTP status; 0 when no reply came (refused connection, or none before the run ended). */
  status: number;
  /** The last attempt's error code (the body's `code`), `cut` for an answer broken off, `unanswered` for none. */
  code: string | null;
  /** The refusals retried before the last attempt, as `status code`. */
  retried: string[];
  /** From its first send to its first token, in trace ms; a non-streamed answer's first token arrives with its last. */
  ttftMs: number | null;
  totalMs: number | null;
}

export interface ReplayOptions {
  inferenceUrl: string;
  requests: readonly TraceRequest[];
  speed: number;
  /** How long (bench ms) to wait after the last send for the answers still out; then they are unanswered. */
  tailMs: number;
  /** Retries of a refusal, as OpenAI's SDKs make them (2 by default there). */
  retries: number;
}

export interface Replay {
  /** Date.now() when trace time 0 was. */
  startedAtMs: number;
  results: RequestResult[];
}

interface Attempt {
  status: number;
  code: string | null;
  retryAfterS: number | undefined;
  firstMs: number | null;
  endMs: number | null;
}

/** A prompt the simulator counts as `tokens` ("user:" is one of them), different for each request. */
const promptOf = (index: number, tokens: number) => `r${index}${' w'.repeat(Math.max(0, tokens - 2))}`;

/** A token frame: a delta with text in it (the role chunk's content is empty). */
const TOKEN = /"content":"[^"]/;

/** What OpenAI's SDKs retry. */
const retryable = (a: Attempt) =>
  a.code !== 'unanswered' && (a.status === 0 || [408, 409, 429].includes(a.status) || a.status >= 500);

/** Their backoff before retry `n` (from 0), in real seconds: Retry-After when it says, else 0.5 s doubling to 8 s, jittered. */
const backoffS = (a: Attempt, n: number, rand: Random) =>
  a.retryAfterS !== undefined && a.retryAfterS <= 60
    ? a.retryAfterS
    : Math.min(0.5 * 2 ** n, 8) * (1 - 0.25 * rand.next());

/** Sends one attempt and reads its answer to the end; resolves, never rejects. */
async function attempt(
  agent: Agent,
  url: string,
  body: string,
  stream: boolean,
  signal: AbortSignal,
): Promise<Attempt> {
  try {
    const reply = await request(url, {
      dispatcher: agent,
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
      signal,
    });
    if (reply.statusCode !== 200) {
      const text = await reply.body.text();
      const after = Number(reply.headers['retry-after']);
      return {
        status: reply.statusCode,
        code: codeOf(text, reply.statusCode),
        retryAfterS: Number.isFinite(after) ? after : undefined,
        firstMs: null,
        endMs: performance.now(),
      };
    }
    if (!stream) {
      await reply.body.text();
      const at = performance.now();
      return { status: 200, code: null, retryAfterS: undefined, firstMs: at, endMs: at };
    }
    let firstMs: number | null = null;
    let tail = '';
    for await (const chunk of reply.body) {
      // Keeps the end of the chunk before, so a frame split across two chunks is still seen.
      tail = tail.slice(-32) + (chunk as Buffer).toString('utf8');
      if (firstMs === null && TOKEN.test(tail)) firstMs = performance.now();
    }
    const done = tail.trimEnd().endsWith('data: [DONE]');
    return { status: 200, code: done ? null : 'cut', retryAfterS: undefined, firstMs, endMs: performance.now() };
  } catch (e) {
    const code = signal.aborted ? 'unanswered' : ((e as { code?: string }).code ?? 'connection_error');
    return { status: 0, code, retryAfterS: undefined, firstMs: null, endMs: null };
  }
}

function codeOf(text: string, status: number): string {
  try {
    const body = JSON.parse(text) as { code?: unknown; error?: { code?: unknown; type?: unknown } };
    const code = body.code ?? body.error?.code ?? body.error?.type;
    if (typeof code === 'string') return code;
  } catch {
    // Not JSON: named by its status.
  }
  return `http_${status}`;
}

const label = (a: Attempt) => (a.status === 0 ? a.code! : `${a.status} ${a.code ?? ''}`.trim());

export async function replay(options: ReplayOptions): Promise<Replay> {
  const { requests, speed } = options;
  const url = `${options.inferenceUrl.replace(/\/+$/, '')}/v1/chat/completions`;
  // No header or body timeout: a request may wait for a switch; the run's end aborts what is left.
  const agent = new Agent({ headersTimeout: 0, bodyTimeout: 0, keepAliveTimeout: 60_000 });
  const giveUp = new AbortController();
  // Every request in flight listens to it.
  setMaxListeners(0, giveUp.signal);
  const jitter = new Random(requests.length);
  const results: RequestResult[] = new Array(requests.length);

  const one = async (i: number, r: TraceRequest, due: number) => {
    const sentAt = performance.now();
    const body = JSON.stringify({
      model: r.model,
      messages: [{ role: 'user', content: promptOf(i, r.prompt_tokens) }],
      max_tokens: r.output_tokens,
      stream: r.stream,
    });
    const retried: string[] = [];
    let last = await attempt(agent, url, body, r.stream, giveUp.signal);
    while (retryable(last) && retried.length < options.retries && !giveUp.signal.aborted) {
      await sleep((1000 * backoffS(last, retried.length, jitter)) / speed, undefined, { signal: giveUp.signal }).catch(
        () => {},
      );
      if (giveUp.signal.aborted) break;
      retried.push(label(last));
      last = await attempt(agent, url, body, r.stream, giveUp.signal);
    }
    const traceMs = (at: number | null) => (at === null ? null : (at - sentAt) * speed);
    results[i] = {
      model: r.model,
      stream: r.stream,
      atMs: r.at_ms,
      lateMs: sentAt - due,
      status: last.status,
      code: last.code,
      retried,
      ttftMs: last.status === 200 ? traceMs(last.firstMs) : null,
      totalMs: traceMs(last.endMs),
    };
  };

  const pending: Promise<void>[] = [];
  // A little ahead, so the first request's send is not its own setup.
  const t0 = performance.now() + 50;
  const startedAtMs = Date.now() + 50;
  for (let i = 0; i < requests.length; i++) {
    const r = requests[i]!;
    const due = t0 + r.at_ms / speed;
    const wait = due - performance.now();
    if (wait > 1) await sleep(wait);
    pending.push(one(i, r, due));
  }
  // What is still out at the end of the tail is given up: its request is aborted, counted unanswered.
  const timer = setTimeout(() => giveUp.abort(), options.tailMs);
  await Promise.all(pending);
  clearTimeout(timer);
  await agent.close().catch(() => {});
  return { startedAtMs, results };
}
