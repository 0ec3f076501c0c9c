/**
 * The server's two listeners: management (host agents, and operators with the admin token) and
 * inference (the OpenAI-compatible routes). Started before the worker takes any task, stopped
 * after the running answers finished or the drain bound passed.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { InstanceRef } from '../api/lifecycle.js';
import type { EngineRoute } from '../gateway/inference/completions.js';
import { buildInferenceApp, type InferenceDeps } from '../gateway/inferenceApp.js';
import { buildManagementApp, type ManagementDeps } from '../gateway/managementApp.js';
import type { RoutingTable } from '../gateway/routingTable.js';
import { isLoopback, listenAddress } from '../settings/listenAddress.js';
import type { ServerSettings } from '../settings/serverDocument.js';
import type { HostDirectory } from './hostDirectory.js';

/** A listener's address is taken (another server runs there) or not this machine's: the server does not start. */
export class ListenRefused extends Error {}

const LISTEN_FAILURES: Record<string, string> = {
  EADDRINUSE: 'address already in use',
  EADDRNOTAVAIL: 'address not available on this machine',
  EACCES: 'permission denied',
};

/** How often a stopping server looks whether its running answers have finished. */
const STOP_POLL_MS = 50;
/**
 * How long a stopping listener waits for its replies to leave once nothing runs any more: enough
 * to write the 503s just given to the waiters. A connection still open then (one that never sent
 * its request, say) would hold the stop for ever.
 */
const REPLIES_OUT_MS = 1_000;

async function listen(app: FastifyInstance, address: string): Promise<string> {
  try {
    return await app.listen(listenAddress(address));
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new ListenRefused(`cannot listen on ${address}: ${(code && LISTEN_FAILURES[code]) ?? (e as Error).message}`);
  }
}

/** Closes a listener: its replies in progress may finish within `ms`, then every connection is cut. */
async function closeWithin(app: FastifyInstance, ms: number): Promise<void> {
  const cut = setTimeout(() => app.server.closeAllConnections(), ms);
  try {
    await app.close();
  } finally {
    clearTimeout(cut);
  }
}

/**
 * How a request reaches an instance's engine: this process's own (a standalone's host), else its
 * host's ingress, with the host's own bound on a silent stream as it last registered.
 */
export function engineRoutes(
  table: RoutingTable,
  directory: Pick<HostDirectory, 'queueOf' | 'ingressOf'>,
  localEngines?: { urlOf(instance: InstanceRef): string | undefined },
): (instance: InstanceRef) => EngineRoute {
  return (instance) => {
    const { deploymentId, instanceIndex } = instance;
    // Starting the waiters told the table which host the instance runs on before any request was let through.
    const hostId = table.hostOf(deploymentId, instanceIndex);
    const streamIdleMs = directory.queueOf(hostId).stream_idle_timeout;
    const local = localEngines?.urlOf(instance);
    if (local !== undefined) return { url: local, streamIdleMs };
    const ingress = hostId && directory.ingressOf(hostId);
    if (!ingress) throw new Error(`no host is known to run instance ${deploymentId}/${instanceIndex}`);
    return {
      url: `${ingress.url}/instances/${deploymentId}/${instanceIndex}`,
      streamIdleMs,
      headers: ingress.headers,
    };
  };
}

export interface ListenersDeps {
  listen: ServerSettings['listen'];
  /** How long running answers may take to finish once the server stops. */
  drainMs: number;
  management: ManagementDeps;
  inference: InferenceDeps;
  logger: Logger;
}

export class Listeners {
  private constructor(
    private readonly deps: ListenersDeps,
    private readonly management: FastifyInstance,
    private readonly inference: FastifyInstance,
  ) {}

  static async build(deps: ListenersDeps): Promise<Listeners> {
    const management = await buildManagementApp(deps.management);
    const inference = await buildInferenceApp(deps.inference);
    return new Listeners(deps, management, inference);
  }

  /** Both bind, or neither stays open: a listener refused closes the other before it throws. */
  async start(): Promise<{ managementUrl: string; inferenceUrl: string }> {
    const { listen: addresses, inference: inferenceDeps, logger } = this.deps;
    try {
      const managementUrl = await listen(this.management, addresses.management);
      const inferenceUrl = await listen(this.inference, addresses.inference);
      if (inferenceDeps.token === undefined && !isLoopback(listenAddress(addresses.inference).host)) {
        logger.warn(
          { inferenceUrl },
          'the inference listener is reachable beyond this machine and asks for no token: set CAPYCTL_INFERENCE_TOKEN',
        );
      }
      return { managementUrl, inferenceUrl };
    } catch (e) {
      await Promise.all([this.management.close(), this.inference.close()]);
      throw e;
    }
  }

  /**
   * Takes no more requests (new and waiting ones are answered 503 dispatch closed), lets the
   * running answers finish within the drain bound, then closes both listeners.
   */
  async stop(): Promise<void> {
    const { drainMs, logger } = this.deps;
    const { queue } = this.deps.inference;
    queue.stopTaking();
    const drainedBy = Date.now() + drainMs;
    while (queue.runningTotal() > 0 && Date.now() < drainedBy) await sleep(STOP_POLL_MS);
    const stillRunning = queue.runningTotal();
    if (stillRunning > 0) logger.warn({ running: stillRunning }, 'answers still running at the drain bound are cut');
    await closeWithin(this.inference, stillRunning > 0 ? 0 : REPLIES_OUT_MS);
    await closeWithin(this.management, REPLIES_OUT_MS);
  }
}
