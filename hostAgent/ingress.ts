/**
 * The host's ingress: the server's requests for `/instances/<deploymentId>/<index>/<engine path>`
 * are forwarded to that instance's local engine, bytes as they come, and counted while in flight.
 * A client that goes away closes the engine's connection, which makes vLLM and SGLang abort.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { pipeline } from 'node:stream/promises';
import { Agent, request } from 'undici';
import { apiErrors, renderApiError } from '../domain/catalogue.js';
import { forwardableHeaders } from '../net/forwarding.js';
import type { EngineSupervisor, InstanceSlot } from './supervisor.js';

const ROUTE = /^\/instances\/([^/]+)\/(\d+)(\/.*)$/;

export class Ingress {
  private readonly inFlight = new Map<string, number>();
  private readonly agent = new Agent({ keepAliveTimeout: 30_000, connections: 256 });
  private server: Server | undefined;

  constructor(private readonly supervisor: EngineSupervisor) {}

  /** Requests being forwarded to an instance now (`ingress_in_flight`). */
  inFlightOf(key: InstanceSlot): number {
    return this.inFlight.get(`${key.deploymentId}/${key.instanceIndex}`) ?? 0;
  }

  /** Requests being forwarded now, to every instance. */
  inFlightTotal(): number {
    let total = 0;
    for (const n of this.inFlight.values()) total += n;
    return total;
  }

  async listen(host: string, port: number): Promise<{ port: number }> {
    this.server = createServer((req, res) => void this.forward(req, res));
    await new Promise<void>((resolve, reject) => {
      this.server!.once('error', reject);
      this.server!.listen(port, host, () => resolve());
    });
    return { port: (this.server.address() as { port: number }).port };
  }

  async close(): Promise<void> {
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
    await this.agent.close();
  }

  private async forward(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const match = ROUTE.exec(req.url ?? '');
    const engine = match && this.supervisor.live({ deploymentId: match[1]!, instanceIndex: Number(match[2]) });
    if (!match || !engine) {
      const reply = renderApiError(apiErrors.notFound('instance', (req.url ?? '').split('/').slice(2, 4).join('/')));
      res.writeHead(reply.status, reply.headers).end(JSON.stringify(reply.body));
      req.resume();
      return;
    }
    const key = `${match[1]}/${match[2]}`;
    this.inFlight.set(key, (this.inFlight.get(key) ?? 0) + 1);
    const abort = new AbortController();
    res.once('close', () => abort.abort());
    try {
      const upstream = await request(`${engine.endpoint.baseUrl}${match[3]}`, {
        method: req.method as 'POST',
        headers: forwardableHeaders(req.headers),
        body: req.method === 'GET' || req.method === 'HEAD' ? null : req,
        dispatcher: this.agent,
        signal: abort.signal,
      });
      res.writeHead(upstream.statusCode, forwardableHeaders(upstream.headers));
      res.flushHeaders();
      await pipeline(upstream.body, res);
    } catch {
      if (!res.headersSent) {
        const reply = renderApiError(apiErrors.engineUnreachable(key));
        res.writeHead(reply.status, reply.headers).end(JSON.stringify(reply.body));
      } else {
        res.destroy();
      }
    } finally {
      this.inFlight.set(key, (this.inFlight.get(key) ?? 1) - 1);
    }
  }
}
