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
 *
 * A client that asked for a whole answer gets one made from the engine's stream (`assemble`): its
 * first output is seen as it comes, so a hang-up after it is a cut with output, as for a stream, and
 * the stream's bounds hold for it too. Its status and headers wait for the stream's end.
 *
 * The exchange is an undici dispatch handler rather than a `request()` and its body stream: every
 * chunk of every answer passes here, and a handler takes each one as it is parsed, without a
 * Readable and an async iterator in between (bench/gatewayOverhead.ts measures the difference).
 */
import type { ServerResponse } from 'node:http';
import type { FastifyBaseLogger } from 'fastify';
import type { Dispatcher } from 'undici';
import { type ApiError, apiErrors, type ErrorCode, renderApiError } from '../../domain/catalogue.js';
import { CLIENT_READ_IDLE_MS, MAX_STREAM_PIECE_BYTES } from '../../domain/limits.js';
import { forwardableHeaders } from '../../net/forwarding.js';
import type { RequestEnd } from '../requestMetrics.js';
import type { Ticket } from '../requestQueue.js';
import { AnswerAssembler } from './answerAssembler.js';
import { EventScanner, type Scan } from './eventScanner.js';

/** A stream's own headers, which a whole answer does not have. */
const STREAM_HEADERS = ['content-type', 'content-length', 'cache-control', 'x-accel-buffering'];

export interface RelayInput {
  ticket: Ticket;
  /** The engine's URL for this request. */
  url: string;
  headers: Record<string, string | string[]>;
  body: Buffer;
  /** The client asked for a whole answer and the engine for a stream: the answer is assembled from it. */
  assemble: boolean;
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

/** How an exchange ended, for the metrics. */
export interface RelayEnd {
  how: RequestEnd;
  /** When (`performance.now()`) its first output came; undefined when none did. */
  outputAtMs: number | undefined;
}

/** Relays the request and its answer; settles once the exchange has ended, whichever way. */
export function relay(x: RelayInput): Promise<RelayEnd> {
  return new Promise((settled) => new Exchange(x, settled).start());
}

class Exchange implements Dispatcher.DispatchHandler {
  private controller: Dispatcher.DispatchController | undefined;
  private stopped: Stop | undefined;
  /** The error the gateway answered in the engine's place, if it did. */
  private answeredError: ErrorCode | undefined;
  private ended = false;
  private status = 0;
  private headers: Record<string, string | string[]> = {};
  /** Set for a stream of events; a whole answer has no opening chunk, so its arrival is its output. */
  private scanner: EventScanner | undefined;
  /** Set for a stream the client is answered whole. */
  private assembler: AnswerAssembler | undefined;
  /** When the first output came. */
  private outputAtMs: number | undefined;
  /** The status and headers went to the client: the first output came to a stream, or its end to a whole answer. */
  private opened = false;
  /** A stream's events before its first output. */
  private readonly held: Buffer[] = [];
  /** Bounds the engine's silence after the first output, while the engine is being read. */
  private idle: NodeJS.Timeout | undefined;
  /** Bounds the client's not reading, while the engine waits for it. */
  private slow: NodeJS.Timeout | undefined;
  /** The client hung up. */
  private readonly hungUp: () => void;
  /** The client's socket drained after it read nothing for a while. */
  private readonly drained: () => void;

  constructor(
    private readonly x: RelayInput,
    private readonly settled: (end: RelayEnd) => void,
  ) {
    // Listeners made here, not as arrow fields: tsx names every such field on every instance.
    this.hungUp = () => this.stop({ kind: 'client' });
    this.drained = () => this.resume();
    if (x.hangUp.aborted) this.hungUp();
    else x.hangUp.addEventListener('abort', this.hungUp, { once: true });
    x.ticket.onDeadline((error) => this.stop({ kind: 'deadline', error }));
  }

  start(): void {
    // A client gone before the exchange began was answered in the constructor.
    if (this.ended) return;
    // The URL is one the gateway made (`instanceUrl` and the request's path): splitting it at its
    // path costs less than parsing it, on every request.
    const { url } = this.x;
    const pathAt = url.indexOf('/', url.indexOf('//') + 2);
    const origin = url.slice(0, pathAt);
    this.x.dispatcher.dispatch(
      { origin, path: url.slice(pathAt), method: 'POST', headers: this.x.headers, body: this.x.body },
      this,
    );
  }

  /** Ends the exchange short: the engine's connection closes, and `onResponseError` settles it. */
  private stop(why: Stop): void {
    if (this.ended || this.stopped) return;
    this.stopped = why;
    if (this.controller) return this.controller.abort(new Error(stopReason(why)));
    // Not yet on a connection: the client is answered now, and `onRequestStart` aborts the request
    // once it gets one.
    this.fail(new Error(stopReason(why)));
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.stopped) controller.abort(new Error(stopReason(this.stopped)));
  }

  onResponseStart(_: Dispatcher.DispatchController, status: number, headers: Record<string, string | string[]>): void {
    this.status = status;
    this.headers = headers;
    if (!/^text\/event-stream\b/i.test(String(headers['content-type'] ?? ''))) return this.open();
    this.scanner = new EventScanner({ findOutput: !this.x.assemble });
    if (this.x.assemble) this.assembler = new AnswerAssembler();
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.stopped) return;
    this.idle?.refresh();
    if (!this.scanner) return this.write(controller, chunk);
    const scan = this.scanner.push(chunk);
    if (this.assembler) return this.assemble(controller, scan);
    let whole = scan.whole;
    if (!this.opened) {
      this.held.push(whole);
      if (!scan.output) whole = Buffer.alloc(0);
      else {
        this.open();
        whole = Buffer.concat(this.held.splice(0));
      }
    }
    if (whole.length > 0) this.write(controller, whole);
    if (scan.oversized)
      this.stop({ kind: 'bound', why: `a single piece of the answer is larger than ${MAX_STREAM_PIECE_BYTES} bytes` });
  }

  /** Takes a stream's events into the whole answer; nothing goes to the client before its end. */
  private assemble(controller: Dispatcher.DispatchController, scan: Scan): void {
    const assembler = this.assembler!;
    try {
      assembler.push(scan.whole);
    } catch (e) {
      // Not the JSON of a stream's chunks: the engine failed.
      return controller.abort(e as Error);
    }
    if (assembler.output && this.outputAtMs === undefined) this.outputCame();
    if (scan.oversized)
      this.stop({ kind: 'bound', why: `a single piece of the answer is larger than ${MAX_STREAM_PIECE_BYTES} bytes` });
  }

  onResponseEnd(): void {
    if (this.ended) return;
    if (this.assembler) return this.answerWhole();
    // A stream that ended without output (only its opening, say) is the whole answer all the same.
    if (!this.opened) this.open();
    this.x.res.end(Buffer.concat([...this.held, this.scanner?.rest() ?? Buffer.alloc(0)]));
    this.end(false);
  }

  /** The stream ended: the client is answered the whole answer made from it, as the engine would have answered it. */
  private answerWhole(): void {
    const assembler = this.assembler!;
    try {
      assembler.push(this.scanner!.rest());
    } catch (e) {
      return this.fail(e as Error);
    }
    const { status, body } = assembler.whole();
    const json = JSON.stringify(body);
    const headers = forwardableHeaders(this.headers, STREAM_HEADERS);
    this.status = status;
    this.headers = {
      ...headers,
      'content-type': 'application/json',
      'content-length': String(Buffer.byteLength(json)),
    };
    this.open();
    this.x.res.end(json);
    this.end(false);
  }

  onResponseError(_: Dispatcher.DispatchController, error: Error): void {
    this.fail(error);
  }

  /** Ends an exchange that did not finish: stopped on purpose (`stopped`), or failed by the engine. */
  private fail(error: Error): void {
    if (this.ended) return;
    const { res, log, ticket } = this.x;
    const why = this.stopped;
    if (!why) {
      log.warn({ err: error }, 'the engine connection failed');
      const { deploymentId, instanceIndex } = ticket.instance;
      if (res.headersSent) res.destroy();
      else this.sendError(apiErrors.engineUnreachable(`${deploymentId}/${instanceIndex}`));
      return this.end(false);
    }
    if (why.kind === 'deadline' && !res.headersSent) {
      this.sendError(why.error);
    } else {
      // A stream cannot say why it ends mid-way: the connection closes, so the client sees it cut.
      if (why.kind === 'bound') log.info({ url: this.x.url }, `answer ended: ${why.why}`);
      res.destroy();
    }
    this.end(true);
  }

  /** The first output came: the deadline is met, and the engine's silence is bounded from now. */
  private outputCame(): void {
    this.outputAtMs = performance.now();
    this.x.ticket.firstOutput();
    this.armIdle();
  }

  /** The status and headers go to the client: with the first output, or with the whole answer. */
  private open(): void {
    if (this.outputAtMs === undefined) this.outputCame();
    this.opened = true;
    this.x.res.writeHead(this.status, forwardableHeaders(this.headers));
  }

  private armIdle(): void {
    this.idle = setTimeout(
      () => this.stop({ kind: 'bound', why: `the engine sent nothing for ${this.x.streamIdleMs} ms` }),
      this.x.streamIdleMs,
    );
  }

  private write(controller: Dispatcher.DispatchController, bytes: Buffer): void {
    const { res } = this.x;
    if (res.write(bytes) || this.slow) return;
    // The client's socket does not drain: it reads nothing. Reading the engine waits meanwhile, so
    // the engine's silence is no longer its own.
    controller.pause();
    clearTimeout(this.idle);
    this.idle = undefined;
    this.slow = setTimeout(
      () => this.stop({ kind: 'bound', why: `the client read nothing for ${CLIENT_READ_IDLE_MS} ms` }),
      CLIENT_READ_IDLE_MS,
    );
    res.once('drain', this.drained);
  }

  private resume(): void {
    clearTimeout(this.slow);
    this.slow = undefined;
    if (this.stopped || this.ended) return;
    if (this.outputAtMs !== undefined) this.armIdle();
    this.controller?.resume();
  }

  private sendError(error: ApiError): void {
    this.answeredError = error.code;
    const reply = renderApiError(error);
    this.x.res.writeHead(reply.status, reply.headers).end(JSON.stringify(reply.body));
  }

  private end(cut: boolean): void {
    this.ended = true;
    clearTimeout(this.idle);
    clearTimeout(this.slow);
    this.x.res.off('drain', this.drained);
    this.x.hangUp.removeEventListener('abort', this.hungUp);
    this.x.ticket.finish({ cut });
    this.settled({ how: this.answeredError ?? (cut ? 'cut' : 'none'), outputAtMs: this.outputAtMs });
  }
}

/** What the engine's connection is aborted with: the reason, for undici's error and the logs. */
function stopReason(why: Stop): string {
  if (why.kind === 'client') return 'the client hung up';
  if (why.kind === 'deadline') return why.error.message;
  return why.why;
}
