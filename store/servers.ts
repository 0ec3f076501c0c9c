/**
 * The servers that share this store: each writes its row when it starts and again every
 * `SERVER_BEAT_MS`, so a switch reaches the gateway of every one that may hold requests. A server
 * not seen for `SERVER_GONE_AFTER_MS` is gone (killed, or stopped for good): its requests went with it.
 */
import type { Db } from './db.js';

export const SERVER_BEAT_MS = 2_000;
/** A few beats: a server busy for a moment is not taken for gone. */
export const SERVER_GONE_AFTER_MS = 4 * SERVER_BEAT_MS;

export interface ServerRow {
  id: string;
  taskQueue: string;
}

/** The store's own name (one row, written by its migration): its servers' workflows are named after it. */
export async function storeId(db: Db): Promise<string> {
  const [row] = await db.query<{ id: string }>('SELECT id::text AS id FROM store_identity');
  if (!row) throw new Error('the store has no identity row: its migrations did not run');
  return row.id;
}

/** The server's row, if it is there: its previous run's, when that was killed. */
export async function findServer(db: Db, id: string): Promise<ServerRow | undefined> {
  const [row] = await db.query<{ task_queue: string }>('SELECT task_queue FROM servers WHERE id = $1', [id]);
  return row && { id, taskQueue: row.task_queue };
}

/** True when the row was not there: new, or taken out by a server that found this one gone. */
export async function markServerSeen(db: Db, server: ServerRow): Promise<boolean> {
  const [row] = await db.query<{ inserted: boolean }>(
    `INSERT INTO servers (id, task_queue, last_seen_at) VALUES ($1, $2, now())
     ON CONFLICT (id) DO UPDATE SET task_queue = EXCLUDED.task_queue, last_seen_at = now()
     RETURNING (xmax = 0) AS inserted`,
    [server.id, server.taskQueue],
  );
  return row?.inserted ?? false;
}

/** A server stopping cleanly: no switch waits for its gateway any more. */
export async function forgetServer(db: Db, id: string): Promise<void> {
  await db.query('DELETE FROM servers WHERE id = $1', [id]);
}

/** The servers seen within the bound. */
export async function liveServers(db: Db): Promise<ServerRow[]> {
  const rows = await db.query<{ id: string; task_queue: string }>(
    `SELECT id, task_queue FROM servers
     WHERE last_seen_at > now() - make_interval(secs => $1::double precision / 1000) ORDER BY id`,
    [SERVER_GONE_AFTER_MS],
  );
  return rows.map((r) => ({ id: r.id, taskQueue: r.task_queue }));
}

/** Servers past the bound, taken out of the table: their demands are withdrawn by whoever finds them. */
export async function takeGoneServers(db: Db): Promise<ServerRow[]> {
  const rows = await db.query<{ id: string; task_queue: string }>(
    `DELETE FROM servers WHERE last_seen_at <= now() - make_interval(secs => $1::double precision / 1000)
     RETURNING id, task_queue`,
    [SERVER_GONE_AFTER_MS],
  );
  return rows.map((r) => ({ id: r.id, taskQueue: r.task_queue }));
}
