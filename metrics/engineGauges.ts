/**
 * The gauges the server and the host agents both expose, under the same names so a dashboard reads
 * either: each engine's latest load sample, and GPU memory by what holds it. Read at each scrape
 * from what the process already keeps; nothing here is sampled on its own.
 */
import { Gauge, type Registry } from 'prom-client';
import type { EngineLoad } from '../engines/engine.js';
import type { ParkTier } from '../domain/vocabulary.js';
import { parkTierLabel } from './labelValues.js';

/** One engine's latest load sample, by where it runs. */
export interface EngineReading {
  host: string;
  deployment: string;
  instanceIndex: number;
  load: EngineLoad;
}

/** GPU memory one state holds on one GPU of a host (a parked model's tier says how much it kept). */
export interface GpuHeld {
  host: string;
  /** The GPU's index on its host. */
  gpu: number;
  state: string;
  parkTier: ParkTier | null;
  bytes: number;
}

const PPM = 1_000_000;

/** `capyctl_engine_requests_running`, `…_waiting` and `capyctl_engine_kv_cache_usage_ratio`, per instance. */
export function engineGauges(registry: Registry, read: () => EngineReading[]): void {
  // Not `instance`: Prometheus sets that label itself, to the scraped target.
  const labelNames = ['host', 'deployment', 'instance_index'] as const;
  const gauge = (name: string, help: string, value: (load: EngineLoad) => number) =>
    new Gauge({
      name,
      help,
      labelNames,
      registers: [registry],
      collect() {
        this.reset();
        for (const r of read())
          this.set({ host: r.host, deployment: r.deployment, instance_index: String(r.instanceIndex) }, value(r.load));
      },
    });
  gauge('capyctl_engine_requests_running', 'Requests the engine runs, as its latest sample says.', (l) => l.running);
  gauge(
    'capyctl_engine_requests_waiting',
    'Requests queued inside the engine, as its latest sample says.',
    (l) => l.waiting,
  );
  gauge(
    'capyctl_engine_kv_cache_usage_ratio',
    'Share of the engine’s KV cache in use (0 to 1), as its latest sample says.',
    (l) => l.kv_usage_ppm / PPM,
  );
}

/** `capyctl_gpu_memory_bytes`: GPU memory held on each GPU of each host, by the state of what holds it. */
export function gpuMemoryGauge(registry: Registry, read: () => Promise<GpuHeld[]>): void {
  new Gauge({
    name: 'capyctl_gpu_memory_bytes',
    help: 'GPU memory held on a GPU of a host, by the state (and park tier) of the models holding it.',
    labelNames: ['host', 'gpu', 'state', 'park_tier'] as const,
    registers: [registry],
    async collect() {
      const held = await read();
      this.reset();
      for (const h of held)
        this.inc({ host: h.host, gpu: String(h.gpu), state: h.state, park_tier: parkTierLabel(h.parkTier) }, h.bytes);
    },
  });
}
