/** Instances: the store's mirror of what each host scheduler's ledger says a GPU holds. */
import { instanceStates, parkTiers } from '../domain/vocabulary.js';
import type { Instance } from '../api/catalogue.js';
import type { Db } from './db.js';

export type { Instance } from '../api/catalogue.js';

interface Row {
  deployment_id: string;
  instance_index: number;
  host_id: string;
  generation: number;
  observed_state: string;
  park_tier: string | null;
  gpu_bytes: number;
  host_ram_bytes: number;
  gpu_indexes: number[];
  residue_bytes: number | null;
  updated_at: Date;
}

const fromRow = (r: Row): Instance => ({
  deploymentId: r.deployment_id,
  index: r.instance_index,
  hostId: r.host_id,
  generation: r.generation,
  observedState: instanceStates.parse(r.observed_state),
  parkTier: r.park_tier === null ? null : parkTiers.parse(r.park_tier),
  gpuBytes: r.gpu_bytes,
  hostRamBytes: r.host_ram_bytes,
  gpuIndexes: r.gpu_indexes,
  residueBytes: r.residue_bytes,
  updatedAt: r.updated_at,
});

/**
 * `gpuIndexes` and `residueBytes` are absent in a step scheduled before the store recorded them (a
 * switch in flight across an upgrade): not known, as an empty list and null say.
 */
export type InstanceUpdate = Omit<Instance, 'updatedAt' | 'gpuIndexes' | 'residueBytes'> & {
  gpuIndexes?: number[];
  residueBytes?: number | null;
};

/**
 * Writes an instance's observed state. Idempotent, and never goes back in time: an update with an
 * older generation than the stored one is ignored (a late retry of an activity).
 */
export async function saveInstance(db: Db, i: InstanceUpdate): Promise<void> {
  await db.query(
    `INSERT INTO instances
       (deployment_id, instance_index, host_id, generation, observed_state, park_tier, gpu_bytes, host_ram_bytes,
        gpu_indexes, residue_bytes)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
     ON CONFLICT (deployment_id, instance_index) DO UPDATE SET
       host_id = EXCLUDED.host_id, generation = EXCLUDED.generation, observed_state = EXCLUDED.observed_state,
       park_tier = EXCLUDED.park_tier, gpu_bytes = EXCLUDED.gpu_bytes, host_ram_bytes = EXCLUDED.host_ram_bytes,
       gpu_indexes = EXCLUDED.gpu_indexes, residue_bytes = EXCLUDED.residue_bytes, updated_at = now()
     WHERE instances.generation <= EXCLUDED.generation`,
    [
      i.deploymentId,
      i.index,
      i.hostId,
      i.generation,
      instanceStates.parse(i.observedState),
      i.parkTier === null ? null : parkTiers.parse(i.parkTier),
      i.gpuBytes,
      i.hostRamBytes,
      i.gpuIndexes ?? [],
      i.residueBytes ?? null,
    ],
  );
}

export async function listInstances(
  db: Db,
  filter: { deploymentId?: string; hostId?: string } = {},
): Promise<Instance[]> {
  const rows = await db.query<Row>(
    `SELECT * FROM instances
     WHERE ($1::text IS NULL OR deployment_id = $1) AND ($2::text IS NULL OR host_id = $2)
     ORDER BY deployment_id, instance_index`,
    [filter.deploymentId ?? null, filter.hostId ?? null],
  );
  return rows.map(fromRow);
}
