/**
 * The store as the per-GPU tests fill it: hosts whose GPUs are alike, and a deployment's instance
 * holding memory on some of them, as a switch's rows record it.
 */
import type { MemoryKind } from '../../domain/vocabulary.js';
import { loadSettings } from '../../settings/load.js';
import type { Db } from '../../store/db.js';
import { saveDeployment } from '../../store/deployments.js';
import { issueHostToken, registerHost } from '../../store/hosts.js';
import { type InstanceUpdate, saveInstance } from '../../store/instances.js';

const GiB = 2 ** 30;

/** Registers `id` with `count` GPUs of `gib` GiB each. */
export async function registerGpuHost(
  db: Db,
  id: string,
  gpus: { count: number; gib: number; kind?: MemoryKind },
  hostRamBytes: number | null = null,
): Promise<void> {
  const memoryKind = gpus.kind ?? 'discrete';
  await registerHost(db, await issueHostToken(db), {
    id,
    gpus: Array.from({ length: gpus.count }, (_, index) => ({
      index,
      name: `sim-${index}`,
      memoryBytes: gpus.gib * GiB,
      memoryKind,
    })),
    hostRamBytes,
    settings: {},
  });
}

/** Deploys `name` and records its first instance on `hostId`, ready unless `row` says otherwise. */
export async function instanceOf(
  db: Db,
  name: string,
  hostId: string,
  row: Pick<InstanceUpdate, 'gpuBytes'> & Partial<InstanceUpdate>,
): Promise<void> {
  const spec = loadSettings('deployment', { text: `name: ${name}\nengine: vllm\nmodel: m\n` });
  const { deployment } = await saveDeployment(db, spec);
  await saveInstance(db, {
    deploymentId: deployment.id,
    index: 0,
    hostId,
    generation: 1,
    observedState: 'ready',
    parkTier: null,
    hostRamBytes: 0,
    ...row,
  });
}
