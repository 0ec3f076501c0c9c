/** Wake references: an instance's first answer to the wake check, compared after every wake. */
import type { WakeReference } from '../api/lifecycle.js';
import type { Db } from './db.js';

/** A wake reference as recorded: whose first answer it is, at which revision, and when. */
export interface RecordedWakeReference extends WakeReference {
  deploymentId: string;
  instanceIndex: number;
  revision: number;
  recordedAt: Date;
}

interface Row {
  deployment_id: string;
  instance_index: number;
  revision: number;
  generation: number;
  probe: unknown;
  answer: unknown;
  recorded_at: Date;
}

/**
 * Records the first answer of one generation of an instance. A later generation (a restart)
 * replaces it; a retry for the same generation keeps the answer recorded first.
 */
export async function recordWakeReference(db: Db, ref: Omit<RecordedWakeReference, 'recordedAt'>): Promise<void> {
  await db.query(
    `INSERT INTO wake_references (deployment_id, instance_index, revision, generation, probe, answer)
     VALUES ($1, $2, $3, $4, $5::jsonb, $6::jsonb)
     ON CONFLICT (deployment_id, instance_index) DO UPDATE SET
       revision = EXCLUDED.revision, generation = EXCLUDED.generation, probe = EXCLUDED.probe,
       answer = EXCLUDED.answer, recorded_at = now()
     WHERE wake_references.generation < EXCLUDED.generation`,
    [
      ref.deploymentId,
      ref.instanceIndex,
      ref.revision,
      ref.generation,
      JSON.stringify(ref.probe),
      JSON.stringify(ref.answer),
    ],
  );
}

export async function findWakeReference(
  db: Db,
  deploymentId: string,
  instanceIndex: number,
): Promise<RecordedWakeReference | undefined> {
  const [r] = await db.query<Row>('SELECT * FROM wake_references WHERE deployment_id = $1 AND instance_index = $2', [
    deploymentId,
    instanceIndex,
  ]);
  return (
    r && {
      deploymentId: r.deployment_id,
      instanceIndex: r.instance_index,
      revision: r.revision,
      generation: r.generation,
      probe: r.probe,
      answer: r.answer,
      recordedAt: r.recorded_at,
    }
  );
}
