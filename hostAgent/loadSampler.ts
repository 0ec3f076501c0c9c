/**
 * About once a second: each ready engine's load (its metrics, and the requests forwarded to it),
 * sent to the server in one report. A tick never overlaps the one before.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { MaxRunning } from '../engines/engine.js';
import type { SamplesBody } from '../api/hosts.js';
import type { ServerClient } from './serverClient.js';
import type { EngineSupervisor, InstanceSlot, SupervisedEngine } from '../activities/supervisor.js';

const PERIOD_MS = 1_000;
const ENGINE_TIMEOUT_MS = 800;

export class LoadSampler {
  private stopped = new AbortController();
  private loop: Promise<void> | undefined;
  /** An engine's max_running does not change while it runs: asked once per generation. */
  private readonly maxRunning = new WeakMap<SupervisedEngine, MaxRunning>();
  /** The last report taken, for the host's metrics. */
  latest: SamplesBody | undefined;

  constructor(
    private readonly deps: {
      supervisor: EngineSupervisor;
      /** Requests being forwarded to an instance now (`ingress_in_flight`). */
      inFlightOf: (key: InstanceSlot) => number;
      server: ServerClient;
      logger: Logger;
    },
  ) {}

  start(): void {
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.stopped.abort();
    await this.loop;
  }

  /** One report: the samples of every ready engine. */
  async sample(): Promise<SamplesBody> {
    const ready = this.deps.supervisor.list().filter((e) => e.stage === 'ready' && e.exit === undefined);
    const instances = await Promise.all(
      ready.map(async (e) => {
        const signal = AbortSignal.timeout(ENGINE_TIMEOUT_MS);
        const [engine, maxRunning] = await Promise.all([
          e.adapter.sampleLoad(e.endpoint, { signal }).catch(() => null),
          this.maxRunningOf(e, signal),
        ]);
        return {
          deployment_id: e.key.deploymentId,
          instance_index: e.key.instanceIndex,
          generation: e.key.generation,
          ingress_in_flight: this.deps.inFlightOf(e.key),
          engine,
          max_running: maxRunning,
        };
      }),
    );
    return { sampled_at_ms: Date.now(), instances };
  }

  private async maxRunningOf(e: SupervisedEngine, signal: AbortSignal): Promise<MaxRunning> {
    const known = this.maxRunning.get(e);
    if (known) return known;
    const asked = await e.adapter.maxRunning(e.endpoint, { spec: e.spec, command: e.command }, { signal });
    if (asked.count !== undefined) this.maxRunning.set(e, asked);
    return asked;
  }

  private async run(): Promise<void> {
    const signal = this.stopped.signal;
    while (!signal.aborted) {
      const started = Date.now();
      try {
        this.latest = await this.sample();
        await this.deps.server.reportSamples(this.latest);
      } catch (e) {
        this.deps.logger.warn({ err: e }, 'load report failed');
      }
      await sleep(Math.max(0, PERIOD_MS - (Date.now() - started)), undefined, { signal }).catch(() => {});
    }
  }
}
