/**
 * The little HTTP layer the simulator needs, on bare node:http: a route table and reply helpers.
 * No framework, so the cost per request that benchmarks subtract stays small.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';

export interface Exchange {
  res: ServerResponse;
  query: URLSearchParams;
  /** The parsed JSON body; undefined when there was none. */
  body: unknown;
}

export type Handler = (exchange: Exchange) => void | Promise<void>;

export interface Route {
  handler: Handler;
  /** Answered while the engine is still loading; every other route answers 503 then. */
  whileLoading: boolean;
}

export class Router {
  private readonly routes = new Map<string, Map<string, Route>>();

  on(method: 'GET' | 'POST', path: string, handler: Handler, options: { whileLoading?: boolean } = {}): this {
    let byMethod = this.routes.get(path);
    if (!byMethod) this.routes.set(path, (byMethod = new Map()));
    byMethod.set(method, { handler, whileLoading: options.whileLoading ?? false });
    return this;
  }

  /** The route, or why there is none: 404 for an unknown path, 405 for a known path's other methods. */
  find(method: string, path: string): Route | 404 | 405 {
    const byMethod = this.routes.get(path);
    if (!byMethod) return 404;
    return byMethod.get(method) ?? 405;
  }
}

const JSON_TYPE = 'application/json';

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': JSON_TYPE, 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

export function sendText(
  res: ServerResponse,
  status: number,
  text: string,
  contentType = 'text/plain; charset=utf-8',
): void {
  res.writeHead(status, { 'content-type': contentType, 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

export function sendEmpty(res: ServerResponse, status: number): void {
  res.writeHead(status, { 'content-length': 0 });
  res.end();
}

export async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}
