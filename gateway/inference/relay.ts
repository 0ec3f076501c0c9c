/**
 * One dispatched request's exchange with its engine: the request goes to the instance, the answer
 * comes back byte for byte (a stream's events whole, never re-encoded). The relay decides when the
 * answer's first output came (the ticket's `firstOutput`), when the exchange ends short, and
 * reports the end to the ticket.
 *
 * The answer's status and headers wait for its first output, so a request the deadline ends before
 * any output is still answered with the deadline's error: TensorFold's opening chunk, which names
 * only the role, is held back with them. Every way an exchange ends short closes the engine's
 * connection, which is what makes vLLM and SGLang stop working on the request.
 */
import { once } from 'node:events';
import type { ServerResponse } from 'node:http';
import type { FastifyBaseLogger } from 'fastify';
import { type Dispatcher, request } from 'undici';
import { type ApiError, apiErrors, renderApiError } from '../../domain/catalogue.js';
import { CLIENT_READ_IDLE_MS, MAX_STREAM_PIECE_BYTES } from '../../domain/limits.js';
import { forwardableHeaders } from '../../net/forwarding.js';
import type { Ticket } from '../requestQueue.js';
import { EventScanner } from './eventScanner.js';

export interface RelayInput {
  ticket: Ticket;
  /** The engine's URL for this request. */
  url: string;
  headers: Record<string, string | string[]>;
  body: Buffer;
  /** The client's reply, taken over from Fastify. */
  res: ServerResponse;
  /** Fires when the client hangs up. */
  hangUp: AbortSignal;
  dispatcher: Dispatcher;
  /** The longest silence of the engine after the first output (stream_idle_timeout). */
  streamIdleMs: number;
  log: FastifyBaseLogger;
}

/** Why an exchange ended short. */
type Stop = { kind: 'client' } | { kind: 'deadline'; error: ApiError } | { kind: 'bound'; why: string };

/** Runs `then` when the signal aborts, at once if it has; returns the way to stop listening. */
function onAbort(signal: AbortSignal, then: () => void): () => void {
  if (signal.aborted) {
    then();
    return () => {};
  }
  signal.addEventListener('abort', then, { once: true });
  return () => signal.removeEventListener('abort', then);
}

function sendError(res: ServerResponse, error: ApiError): void {
  const reply = renderApiError(error);
  res.writeHead(reply.status, reply.headers).end(JSON.stringify(reply.body));
}

export async function relay(x: RelayInput): Promise<void> {
  const stopper = new AbortController();
  const stop = (why: Stop) => {
    if (!stopper.signal.aborted) stopper.abort(why);
  };
  const unlisten = [
    onAbort(x.hangUp, () => stop({ kind: 'client' })),
    onAbort(x.ticket.deadline, () => stop({ kind: 'deadline', error: x.ticket.deadline.reason as ApiError })),
  ];
  let cut = false;
  try {
    const answer = await request(x.url, { method: 'POST', headers: x.headers, body: x.body, dispatcher: x.dispatcher, signal: stopper.signal });
    await pass(x, answer, stop, stopper.signal);
  } catch (error) {
    cut = settle(x, stopper.signal, error);
  } finally {
    for (const off of unlisten) off();
    x.ticket.finish({ cut });
  }
}

/** Ends an exchange that did not finish; whether it was cut short (rather than failed by the engine). */
function settle(x: RelayInput, signal: AbortSignal, error: unknown): boolean {
  const { res } = x;
  if (!signal.aborted) {
    x.log.warn({ err: error }, 'the engine connection failed');
    const { deploymentId, instanceIndex } = x.ticket.instance;
    if (res.headersSent) res.destroy();
    else sendError(res, apiErrors.engineUnreachable(`${deploymentId}/${instanceIndex}`));
    return false;
  }
  const why = signal.reason as Stop;
  if (why.kind === 'deadline' && !res.headersSent) {
    sendError(res, why.error);
  } else {
    // A stream cannot say why it ends mid-way: the connection closes, so the client sees it cut.
    if (why.kind === 'bound') x.log.info({ url: x.url }, `answer ended: ${why.why}`);
    res.destroy();
  }
  return true;
}

/** Copies the answer to the client, holding it back until its first output; throws when stopped. */
async function pass(x: RelayInput, answer: Dispatcher.ResponseData, stop: (why: Stop) => void, signal: AbortSignal): Promise<void> {
  const { res, ticket } = x;
  const halt = (why: Stop): never => {
    stop(why);
    throw signal.reason;
  };
  const scanner = /^text\/event-stream\b/i.test(String(answer.headers['content-type'] ?? '')) ? new EventScanner() : undefined;
  let opened = false;
  const open = () => {
    opened = true;
    ticket.firstOutput();
    res.writeHead(answer.statusCode, forwardableHeaders(answer.headers));
  };
  const write = async (bytes: Buffer) => {
    if (res.write(bytes)) return;
    // The client's socket does not drain: it reads nothing. Reading the engine waits meanwhile.
    const slow = setTimeout(() => stop({ kind: 'bound', why: `the client read nothing for ${CLIENT_READ_IDLE_MS} ms` }), CLIENT_READ_IDLE_MS);
    try {
      await once(res, 'drain', { signal });
    } finally {
      clearTimeout(slow);
    }
  };
  // A whole reply has no opening chunk: its arrival is its output.
  if (!scanner) open();

  const held: Buffer[] = [];
  const chunks = (answer.body as AsyncIterable<Buffer>)[Symbol.asyncIterator]();
  for (;;) {
    // Before the first output the request deadline bounds the silence, after it the idle bound.
    const idle = opened ? setTimeout(() => stop({ kind: 'bound', why: `the engine sent nothing for ${x.streamIdleMs} ms` }), x.streamIdleMs) : undefined;
    let next: IteratorResult<Buffer>;
    try {
      next = await chunks.next();
    } finally {
      clearTimeout(idle);
    }
    if (next.done) break;
    if (!scanner) {
      await write(next.value);
      continue;
    }
    const scan = scanner.push(next.value);
    let whole = scan.whole;
    if (!opened) {
      held.push(whole);
      if (scan.output) {
        open();
        whole = Buffer.concat(held.splice(0));
      }
    }
    if (opened && whole.length > 0) await write(whole);
    if (scan.oversized) halt({ kind: 'bound', why: `a single piece of the answer is larger than ${MAX_STREAM_PIECE_BYTES} bytes` });
  }
  // A stream that ended without output (only its opening, say) is the whole answer all the same.
  if (!opened) open();
  res.end(Buffer.concat([...held, scanner?.rest() ?? Buffer.alloc(0)]));
}
