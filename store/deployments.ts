/** Deployments and their revisions. */
import { monotonicFactory } from 'ulid';
import type { DeploymentSpec } from '../settings/deploymentDocument.js';
import type { Deployment, SaveResult } from '../api/catalogue.js';
import { CRASH_LOOP, endsEngine, type Problem, problemBody } from '../domain/problems.js';
import type { Db } from './db.js';

export type { Deployment, SaveResult } from '../api/catalogue.js';
// The activities read it with the rows, from here.
export { checkpointOf } from '../domain/measurement.js';

const newId = monotonicFactory();

interface Row {
  id: string;
  name: string;
  revision: number;
  spec: DeploymentSpec;
  operator_stopped: boolean;
  checkpoint: Record<string, unknown> | null;
  measure_failure: string | null;
  start_failure: string | null;
  last_problem: unknown;
  restarts: number;
  recent_endings: Date[];
  created_at: Date;
  updated_at: Date;
}

const SELECT = `
  SELECT d.id, d.name, d.revision, r.spec, d.operator_stopped, r.checkpoint, r.measure_failure, d.start_failure,
    d.last_problem, d.restarts, d.recent_endings, d.created_at, d.updated_at
  FROM deployments d JOIN deployment_revisions r ON r.deployment_id = d.id AND r.revision = d.revision`;

const fromRow = (r: Row): Deployment => ({
  id: r.id,
  name: r.name,
  revision: r.revision,
  spec: r.spec,
  operatorStopped: r.operator_stopped,
  checkpoint: r.checkpoint,
  measureFailure: r.measure_failure,
  startFailure: r.start_failure,
  lastProblem: r.last_problem === null ? null : problemBody.parse(r.last_problem),
  restarts: r.restarts,
  recentEndings: r.recent_endings,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});

/**
 * The current revision of the deployment named in `spec`, its row locked, and whether `spec` is its
 * spec. Locked first and read after: a look that waited for the lock reads the revision another
 * deploy made meanwhile (one statement that locks and joins would still join the old revision).
 */
async function currentRevision(tx: Db, spec: DeploymentSpec) {
  const [locked] = await tx.query<{ id: string }>('SELECT id FROM deployments WHERE name = $1 FOR UPDATE', [spec.name]);
  if (!locked) return undefined;
  const [current] = await tx.query<{ id: string; revision: number; same: boolean; failed: boolean }>(
    `SELECT d.id, d.revision, r.spec = $2::jsonb AS same, r.measure_failure IS NOT NULL AS failed
     FROM deployments d JOIN deployment_revisions r ON r.deployment_id = d.id AND r.revision = d.revision
     WHERE d.id = $1`,
    [locked.id, JSON.stringify(spec)],
  );
  return current;
}

/**
 * Deploys a spec under its name: a new deployment, a new revision when the spec changed, or nothing.
 * Deploys of one name at the same moment are taken one after the other: one creates it, and each
 * other is unchanged or a new revision, as if it had come second.
 */
export async function saveDeployment(db: Db, spec: DeploymentSpec): Promise<SaveResult> {
  return db.transaction(async (tx) => {
    let current = await currentRevision(tx, spec);
    if (!current) {
      const id = newId();
      // Another deploy of the name may have created it since the look above: then this one waits
      // for it, and is deployed over it.
      const [created] = await tx.query(
        'INSERT INTO deployments (id, name, revision) VALUES ($1, $2, 1) ON CONFLICT (name) DO NOTHING RETURNING id',
        [id, spec.name],
      );
      if (created) {
        await tx.query('INSERT INTO deployment_revisions (deployment_id, revision, spec) VALUES ($1, 1, $2::jsonb)', [
          id,
          JSON.stringify(spec),
        ]);
        return { deployment: (await findDeployment(tx, id))!, outcome: 'created', measure: true };
      }
      current = (await currentRevision(tx, spec))!;
    }
    const { id } = current;
    let outcome: SaveResult['outcome'];
    if (current.same) {
      outcome = 'unchanged';
      // Deploying it again is how an operator asks for another try once the files are in place.
      if (current.failed) await recordMeasureFailure(tx, id, current.revision, null);
    } else {
      outcome = 'revised';
      const revision = current.revision + 1;
      await tx.query('INSERT INTO deployment_revisions (deployment_id, revision, spec) VALUES ($1, $2, $3::jsonb)', [
        id,
        revision,
        JSON.stringify(spec),
      ]);
      await tx.query('UPDATE deployments SET revision = $2, updated_at = now() WHERE id = $1', [id, revision]);
    }
    const deployment = await findDeployment(tx, id);
    // A new revision, or the same one deployed again after its measurement failed.
    return { deployment: deployment!, outcome, measure: !current.same || current.failed };
  });
}

/** A deployment by its ID or its name. */
export async function findDeployment(db: Db, idOrName: string): Promise<Deployment | undefined> {
  const [row] = await db.query<Row>(`${SELECT} WHERE d.id = $1 OR d.name = $1`, [idOrName]);
  return row && fromRow(row);
}

export async function listDeployments(db: Db): Promise<Deployment[]> {
  return (await db.query<Row>(`${SELECT} ORDER BY d.name`)).map(fromRow);
}

/** Marks an operator's stop (a request does not start it) or clears it (an operator's start). */
export async function setOperatorStopped(db: Db, id: string, stopped: boolean): Promise<void> {
  await db.query('UPDATE deployments SET operator_stopped = $2, updated_at = now() WHERE id = $1', [id, stopped]);
}

/** Records the checkpoint measurement of one revision; idempotent. */
export async function recordCheckpoint(
  db: Db,
  id: string,
  revision: number,
  checkpoint: Record<string, unknown>,
): Promise<void> {
  await db.query(
    `UPDATE deployment_revisions
     SET checkpoint = $3::jsonb, measured_at = COALESCE(measured_at, now()), measure_failure = NULL
     WHERE deployment_id = $1 AND revision = $2`,
    [id, revision, JSON.stringify(checkpoint)],
  );
}

/**
 * Records why a revision's measurement failed, or clears it (`reason` null) when it is measured
 * again. A revision already measured keeps its measurement.
 */
export async function recordMeasureFailure(db: Db, id: string, revision: number, reason: string | null): Promise<void> {
  await db.query(
    `UPDATE deployment_revisions SET measure_failure = $3
     WHERE deployment_id = $1 AND revision = $2 AND checkpoint IS NULL`,
    [id, revision, reason],
  );
}

/** Records why the deployment's latest start failed, or clears it (`failure` null) when a start succeeds. */
export async function recordStartFailure(db: Db, id: string, failure: string | null): Promise<void> {
  await db.query('UPDATE deployments SET start_failure = $2 WHERE id = $1', [id, failure]);
}

/**
 * Records a deployment's last problem. One that ended its engine unasked counts a restart and keeps its
 * time among the last few (`CRASH_LOOP`). Idempotent: the same problem of the same generation again (a
 * retried activity, a report sent twice) changes nothing.
 */
export async function recordProblem(db: Db, id: string, problem: Problem): Promise<void> {
  const { kind, host_id, instance_index, generation } = problem;
  await db.query(
    `UPDATE deployments SET last_problem = $2::jsonb,
       restarts = restarts + $3::int,
       recent_endings = CASE WHEN $3::int = 0 THEN recent_endings
         ELSE (recent_endings || $4::timestamptz)[greatest(1, cardinality(recent_endings) + 2 - $5::int):] END
     WHERE id = $1 AND (last_problem IS NULL OR NOT last_problem @> $6::jsonb)`,
    [
      id,
      JSON.stringify(problemBody.parse(problem)),
      endsEngine(kind) ? 1 : 0,
      problem.at,
      CRASH_LOOP.endings,
      JSON.stringify({ kind, host_id, instance_index, generation }),
    ],
  );
}

/** Removes a deployment with its revisions, instances and wake references. True when it existed. */
export async function deleteDeployment(db: Db, id: string): Promise<boolean> {
  return (await db.query('DELETE FROM deployments WHERE id = $1 RETURNING id', [id])).length > 0;
}
