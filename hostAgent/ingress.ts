/**
 * The host's ingress: the server's requests for `/instances/<deploymentId>/<index>/<engine path>`
 * are forwarded to that instance's local engine, bytes as they come, and counted while in flight.
 * A client that goes away closes the engine's connection, which makes vLLM and SGLang abort.
 *
 * It takes requests from the server alone, known by the secret the server gave at registration
 * (refused 401 otherwise), and forwards only the inference routes the gateway sends (404 otherwise):
 * a request here skips the gateway's queue limits, and an engine's control routes (vLLM's `/sleep`,
 * …) are the host's own activities' alone, which reach the engine directly.
 *
 * `GET /metrics` is the host's metrics, to the server's metrics token (`Authorization: Bearer`, a
 * scraper's one credential for the server and every host) or the ingress secret; with no metrics
 * token set on the server, to the secret alone.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { pipeline } from 'node:stream/promises';
import type { Registry } from 'prom-client';
import { Agent, request } from 'undici';
import { type ApiError, apiErrors, CapyError, renderApiError } from '../domain/catalogue.js';
import { bearerToken } from '../net/bearerToken.js';
import { forwardableHeaders } from '../net/forwarding.js';
import { INGRESS_PATHS, INGRESS_SECRET_HEADER } from '../domain/hostIngress.js';
import { secretMatcher } from '../net/secretMatcher.js';
import type { Registration } from './serverClient.js';
import type { EngineSupervisor, InstanceSlot } from '../activities/supervisor.js';

const ROUTE = /^\/instances\/([^/]+)\/(\d+)(\/.*)$/;

export class Ingress {
  private readonly inFlight = new Map<string, number>();
  private readonly agent = new Agent({ keepAliveTimeout: 30_000, connections: 256 });
  private server: Server | undefined;
  /** Refuses every request until the host has registered and holds its secret. */
  private isSecret: (sent: string | undefined) => boolean = () => false;
  private isMetricsToken: (sent: string | undefined) => boolean = () => false;
  private metrics: Registry | undefined;

  constructor(private readonly supervisor: EngineSupervisor) {}

  /** The host's latest registration: its secret is the only one taken from now on, with the server's metrics token. */
  accept({ ingressSecret, metricsToken }: Registration): void {
    this.isSecret = secretMatcher(ingressSecret);
    this.isMetricsToken = metricsToken === undefined ? () => false : secretMatcher(metricsToken);
  }

  /** What `GET /metrics` answers. */
  serveMetrics(registry: Registry): void {
    this.metrics = registry;
  }

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

  private async answerMetrics(registry: Registry, req: IncomingMessage, res: ServerResponse): Promise<void> {
    try {
      const text = await registry.metrics();
      res.writeHead(200, { 'content-type': registry.contentType }).end(text);
    } catch {
      answerError(req, res, apiErrors.internal());
    }
  }

  private async forward(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const sent = req.headers[INGRESS_SECRET_HEADER];
    const hasSecret = this.isSecret(typeof sent === 'string' ? sent : undefined);
    const url = req.url ?? '';
    const [path = ''] = url.split('?', 1);
    if (path === METRICS_PATH && req.method === 'GET' && this.metrics) {
      let bearer: string | undefined;
      try {
        bearer = bearerToken(req);
      } catch (e) {
        if (e instanceof CapyError) return answerError(req, res, e.apiError);
        throw e;
      }
      if (!hasSecret && !this.isMetricsToken(bearer))
        return answerError(req, res, apiErrors.unauthorized('metrics token'));
      return this.answerMetrics(this.metrics, req, res);
    }
    if (!hasSecret) return answerError(req, res, apiErrors.ingressUnauthorized());
    const match = ROUTE.exec(path);
    if (!match || req.method !== 'POST' || !INGRESS_PATHS.has(match[3]!))
      return answerError(req, res, apiErrors.notFound('route', `${req.method} ${path}`));
    const engine = this.supervisor.live({ deploymentId: match[1]!, instanceIndex: Number(match[2]) });
    const key = `${match[1]}/${match[2]}`;
    if (!engine) return answerError(req, res, apiErrors.notFound('instance', key));
    this.inFlight.set(key, (this.inFlight.get(key) ?? 0) + 1);
    const abort = new AbortController();
    res.once('close', () => abort.abort());
    try {
      // The engine path with the request's query, as the gateway sent it.
      const upstream = await request(`${engine.endpoint.baseUrl}${url.slice(path.length - match[3]!.length)}`, {
        method: 'POST',
        // The secret is the ingress's, not the engine's.
        headers: forwardableHeaders(req.headers, [INGRESS_SECRET_HEADER]),
        body: req,
        dispatcher: this.agent,
        signal: abort.signal,
      });
      res.writeHead(upstream.statusCode, forwardableHeaders(upstream.headers));
      res.flushHeaders();
      await pipeline(upstream.body, res);
    } catch {
      if (!res.headersSent) answerError(req, res, apiErrors.engineUnreachable(key));
      else res.destroy();
    } finally {
      this.inFlight.set(key, (this.inFlight.get(key) ?? 1) - 1);
    }
  }
}

const METRICS_PATH = '/metrics';

/** Answers with the error; what is left of the request's body is read and dropped. */
function answerError(req: IncomingMessage, res: ServerResponse, error: ApiError): void {
  const reply = renderApiError(error);
  res.writeHead(reply.status, reply.headers).end(JSON.stringify(reply.body));
  req.resume();
}
