/**
 * The spec's "Example: two apps, one GPU", played by two clients. App 1 streams answers from
 * chat-a on two staggered connections, each sending its next request as soon as the last one ends and
 * retrying a 503 after a short pause. Once App 1 is under way, App 2 sends three requests for
 * chat-b at once. The run ends when App 2 has its answers and App 1 has been served again after
 * the switch back.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';

export interface DemoOptions {
  inferenceUrl: string;
  app1Model: string;
  app2Model: string;
  /** Tokens in each of App 1's answers: long enough that the drain has something to wait for. */
  app1Tokens: number;
  /**
   * When App 1's second connection starts after its first: about half an answer, so that one of
   * them is always between answers while the other runs, as a busy app's would be.
   */
  staggerMs: number;
  /** How long App 1 runs alone before App 2 asks. */
  leadMs: number;
  /** How long App 1 pauses after a 503 before it retries. */
  retryMs: number;
}

export interface RequestSeen {
  app: 1 | 2;
  model: string;
  sentAtMs: number;
  status: number;
  /** The first output (streamed) or the whole answer (not streamed) arrived. */
  firstOutputAtMs: number | null;
  endedAtMs: number;
  /** The error's message, for an answer that is an error. */
  error?: string;
}

async function ask(url: string, app: 1 | 2, model: string, maxTokens: number, stream: boolean): Promise<RequestSeen> {
  const sentAtMs = Date.now();
  const reply = await request(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      model,
      messages: [{ role: 'user', content: `app ${app} asks` }],
      max_tokens: maxTokens,
      stream,
    }),
    headersTimeout: 0,
    bodyTimeout: 0,
  });
  if (reply.statusCode !== 200) {
    const body = (await reply.body.json()) as { message?: string };
    return {
      app,
      model,
      sentAtMs,
      status: reply.statusCode,
      firstOutputAtMs: null,
      endedAtMs: Date.now(),
      error: body.message,
    };
  }
  let firstOutputAtMs: number | null = null;
  for await (const chunk of reply.body) {
    // A streamed answer's first output is its first content, not the chunk that names the role.
    if (firstOutputAtMs === null && (!stream || String(chunk).includes('"content":"'))) firstOutputAtMs = Date.now();
  }
  return { app, model, sentAtMs, status: 200, firstOutputAtMs, endedAtMs: Date.now() };
}

export interface DemoRun {
  /** When App 2 sent its requests: the example's 0 s. */
  zeroMs: number;
  requests: RequestSeen[];
}

export async function playTwoApps(o: DemoOptions): Promise<DemoRun> {
  const requests: RequestSeen[] = [];
  // chat-a loaded before the example begins.
  const warm = await ask(o.inferenceUrl, 1, o.app1Model, 1, false);
  if (warm.status !== 200) throw new Error(`${o.app1Model} did not answer: ${warm.status} ${warm.error}`);

  let app2DoneAtMs = Number.POSITIVE_INFINITY;
  const app1Loop = async (startAfterMs: number) => {
    await sleep(startAfterMs);
    for (;;) {
      const seen = await ask(o.inferenceUrl, 1, o.app1Model, o.app1Tokens, true);
      requests.push(seen);
      // Sent after App 2 was served, and served: the switch back happened.
      if (seen.status === 200 && seen.sentAtMs >= app2DoneAtMs) return;
      if (seen.status !== 200) await sleep(o.retryMs);
    }
  };
  const app1 = [app1Loop(0), app1Loop(o.staggerMs)];
  await sleep(o.leadMs);
  const zeroMs = Date.now();
  const app2 = await Promise.all([1, 2, 3].map(() => ask(o.inferenceUrl, 2, o.app2Model, 8, false)));
  requests.push(...app2);
  app2DoneAtMs = Date.now();
  await Promise.all(app1);
  return { zeroMs, requests: requests.sort((a, b) => a.sentAtMs - b.sentAtMs) };
}
