/**
 * HTTP to an engine's routes, shared by every adapter: one keep-alive connection pool, the caller's
 * abort signal on every call, and engine failures turned into `EngineError` kinds the lifecycle maps.
 */
import { Agent, request } from 'undici';
import { z } from 'zod';
import { type CallOptions, type EngineEndpoint, EngineError } from '../../engines/engine.js';

/**
 * Engines are on 127.0.0.1 and asked about once a second: keep the connections. No body or header
 * timeout of its own: a weight reload can take minutes, and every step's deadline is the caller's signal.
 */
const pool = new Agent({ keepAliveTimeout: 30_000, headersTimeout: 0, bodyTimeout: 0, connect: { timeout: 10_000 } });

export interface EngineReply {
  status: number;
  body: string;
}

export interface Call extends CallOptions {
  method?: 'GET' | 'POST';
  /** Sent as a JSON body. */
  json?: unknown;
}

/**
 * Any answer at all, whatever its status. Throws `timeout` when the signal aborts and `unreachable`
 * when nothing answers.
 */
export async function exchange(endpoint: EngineEndpoint, path: string, call: Call = {}): Promise<EngineReply> {
  const { method = 'GET', json, signal } = call;
  try {
    const reply = await request(new URL(path, endpoint.baseUrl), {
      method,
      dispatcher: pool,
      signal,
      headers: json === undefined ? {} : { 'content-type': 'application/json' },
      body: json === undefined ? undefined : JSON.stringify(json),
    });
    // Read the whole body even when it is not wanted, so the connection goes back to the pool.
    return { status: reply.statusCode, body: await reply.body.text() };
  } catch (e) {
    const what = `${method} ${path} on ${endpoint.baseUrl}`;
    if (signal?.aborted) throw new EngineError('timeout', `${what} was aborted: ${String(signal.reason)}`);
    throw new EngineError('unreachable', `${what}: ${e instanceof Error ? e.message : String(e)}`);
  }
}

/** CUDA's and PyTorch's words for a full GPU, as engines pass them on in an error body. */
const outOfMemory = /out of memory|OutOfMemoryError/i;

/**
 * The error an engine's non-2xx answer means, naming who answered, the request and the answer: a
 * route the engine does not have says so.
 */
export function refusal(
  endpoint: EngineEndpoint,
  request: string,
  reply: EngineReply,
  who = 'the engine',
): EngineError {
  const kind = reply.status >= 500 && outOfMemory.test(reply.body) ? 'out_of_memory' : 'refused';
  const what = reply.status === 404 ? 'has no such route' : reply.body.slice(0, 500);
  return new EngineError(kind, `${who} at ${endpoint.baseUrl} answered ${request} with ${reply.status}: ${what}`);
}

export const succeeded = (reply: EngineReply): boolean => reply.status >= 200 && reply.status < 300;

/** A call that must succeed (2xx); returns the body. */
export async function post(endpoint: EngineEndpoint, path: string, call: Omit<Call, 'method'> = {}): Promise<string> {
  const reply = await exchange(endpoint, path, { ...call, method: 'POST' });
  if (!succeeded(reply)) throw refusal(endpoint, `POST ${path}`, reply);
  return reply.body;
}

/** A successful answer parsed with `schema`; any other answer is an `EngineError` naming `who` answered. */
export function expectJson<S extends z.ZodType>(
  endpoint: EngineEndpoint,
  request: string,
  reply: EngineReply,
  schema: S,
  who = 'the engine',
): z.output<S> {
  if (!succeeded(reply)) throw refusal(endpoint, request, reply, who);
  let value: unknown;
  try {
    value = JSON.parse(reply.body);
  } catch {
    value = undefined;
  }
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    throw new EngineError(
      'refused',
      `${who} at ${endpoint.baseUrl} answered ${request} with ${reply.status} but an unexpected body: ` +
        `${reply.body.slice(0, 200)}`,
    );
  }
  return parsed.data;
}

/** A call that must succeed and answer JSON of `schema`. */
export async function fetchJson<S extends z.ZodType>(
  endpoint: EngineEndpoint,
  path: string,
  schema: S,
  call: Call = {},
): Promise<z.output<S>> {
  return expectJson(endpoint, `${call.method ?? 'GET'} ${path}`, await exchange(endpoint, path, call), schema);
}

/** Like `fetchJson`, but null when the engine has no such route (404). */
export async function fetchJsonIfServed<S extends z.ZodType>(
  endpoint: EngineEndpoint,
  path: string,
  schema: S,
  call: Call = {},
): Promise<z.output<S> | null> {
  const reply = await exchange(endpoint, path, call);
  return reply.status === 404 ? null : expectJson(endpoint, `${call.method ?? 'GET'} ${path}`, reply, schema);
}

/** Whether `GET path` answers 200 now; false while the engine refuses connections or answers otherwise. */
export async function answers200(endpoint: EngineEndpoint, path: string, call: CallOptions = {}): Promise<boolean> {
  try {
    return (await exchange(endpoint, path, call)).status === 200;
  } catch (e) {
    if (e instanceof EngineError && e.kind === 'unreachable') return false;
    throw e;
  }
}

/** `GET /version` → `{"version":"0.10.1"}`, as vLLM (and TensorFold) answer it; null without the route. */
export async function versionRoute(endpoint: EngineEndpoint, call: CallOptions = {}): Promise<string | null> {
  return (await fetchJsonIfServed(endpoint, '/version', z.object({ version: z.string() }), call))?.version ?? null;
}
