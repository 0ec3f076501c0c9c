/**
 * A host agent's Prometheus metrics (`GET /metrics` on its ingress): its engines' latest load
 * samples, what each of its GPUs holds by the state of the engine holding it, and which capyctl it
 * runs. Its own registry: a standalone runs a server beside it in the same process.
 */
import { Registry } from 'prom-client';
import { buildInfoGauge } from '../metrics/buildInfo.js';
import { engineGauges, gpuMemoryGauge } from '../metrics/engineGauges.js';
import type { BuildInfo } from '../processes/build.js';
import { type GpuSource, gpuBytesByOwner } from './gpuMemory.js';
import type { LoadSampler } from './loadSampler.js';
import type { EngineSupervisor, SupervisedEngine } from '../activities/supervisor.js';

/** GPU memory no engine of this agent holds (another process on the machine). */
const NOT_AN_ENGINE = 'other';

export function hostMetrics(deps: {
  hostId: string;
  supervisor: EngineSupervisor;
  sampler: LoadSampler;
  gpus: GpuSource;
  build: BuildInfo;
}): Registry {
  const { hostId, supervisor, sampler } = deps;
  const registry = new Registry();
  engineGauges(registry, () =>
    (sampler.latest?.instances ?? []).flatMap((i) =>
      i.engine
        ? [
            {
              host: hostId,
              deployment:
                supervisor.get({ deploymentId: i.deployment_id, instanceIndex: i.instance_index })?.spec.name ??
                i.deployment_id,
              instanceIndex: i.instance_index,
              load: i.engine,
            },
          ]
        : [],
    ),
  );
  gpuMemoryGauge(registry, async () => {
    const engines = new Map<number, SupervisedEngine>();
    for (const e of supervisor.list())
      if (e.process.pid !== undefined && e.exit === undefined) engines.set(e.process.pid, e);
    return (await gpuBytesByOwner(deps.gpus, engines)).map(({ owner: e, gpu, bytes }) => ({
      host: hostId,
      gpu,
      state: e ? e.stage : NOT_AN_ENGINE,
      parkTier: e?.stage === 'parked' ? e.parkTier : null,
      bytes,
    }));
  });
  buildInfoGauge(registry, deps.build);
  return registry;
}
