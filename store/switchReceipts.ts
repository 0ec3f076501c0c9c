/** Switch receipts: what a switch released, what it woke, and how it ended. */
import { switchOutcomes } from '../domain/vocabulary.js';
import type { PhaseTiming } from '../api/lifecycle.js';
import type { SwitchReceipt, Victim } from '../api/catalogue.js';
import type { Db } from './db.js';

export type { SwitchReceipt, Victim } from '../api/catalogue.js';

interface Row {
  switch_id: string;
  host_id: string;
  target_deployment_id: string | null;
  victims: Victim[];
  outcome: string;
  summary: string;
  phases: PhaseTiming[];
  started_at: Date;
  finished_at: Date | null;
}

const fromRow = (r: Row): SwitchReceipt => ({
  switchId: r.switch_id,
  hostId: r.host_id,
  targetDeploymentId: r.target_deployment_id,
  victims: r.victims,
  outcome: switchOutcomes.parse(r.outcome),
  summary: r.summary,
  phases: r.phases,
  startedAt: r.started_at,
  finishedAt: r.finished_at,
});

/**
 * Writes a receipt until it is final: the switch's steps may run again (a retry, a replay), so a
 * receipt that ended is kept as it is. True when this write is the one that ended it, which the
 * server counts in its metrics once.
 */
export async function saveSwitchReceipt(db: Db, r: SwitchReceipt): Promise<boolean> {
  const written = await db.query<{ finished_at: Date | null }>(
    `INSERT INTO switch_receipts
       (switch_id, host_id, target_deployment_id, victims, outcome, summary, phases, started_at, finished_at)
     VALUES ($1, $2, $3, $4::jsonb, $5, $6, $7::jsonb, $8, $9)
     ON CONFLICT (switch_id) DO UPDATE SET victims = EXCLUDED.victims, outcome = EXCLUDED.outcome,
       summary = EXCLUDED.summary, phases = EXCLUDED.phases, finished_at = EXCLUDED.finished_at
     WHERE switch_receipts.finished_at IS NULL
     RETURNING finished_at`,
    [
      r.switchId,
      r.hostId,
      r.targetDeploymentId,
      JSON.stringify(r.victims),
      switchOutcomes.parse(r.outcome),
      r.summary,
      JSON.stringify(r.phases),
      r.startedAt,
      r.finishedAt,
    ],
  );
  return written.some((row) => row.finished_at !== null);
}

export async function findSwitchReceipt(db: Db, switchId: string): Promise<SwitchReceipt | undefined> {
  const [row] = await db.query<Row>('SELECT * FROM switch_receipts WHERE switch_id = $1', [switchId]);
  return row && fromRow(row);
}

/** The newest receipts first, optionally only those whose target is one deployment. */
export async function listSwitchReceipts(
  db: Db,
  filter: { targetDeploymentId?: string; limit?: number; finishedSince?: Date } = {},
): Promise<SwitchReceipt[]> {
  const rows = await db.query<Row>(
    `SELECT * FROM switch_receipts WHERE ($1::text IS NULL OR target_deployment_id = $1)
       AND ($3::timestamptz IS NULL OR finished_at >= $3)
     ORDER BY started_at DESC LIMIT $2`,
    [filter.targetDeploymentId ?? null, filter.limit ?? 100, filter.finishedSince ?? null],
  );
  return rows.map(fromRow);
}
