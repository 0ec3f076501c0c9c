/**
 * The one way the store talks SQL: a Postgres pool (`DATABASE_URL`) or an embedded Postgres
 * (PGlite) for the zero-setup standalone. Both run the same migrations and the same queries.
 */
import pg from 'pg';

export interface Db {
  query<R extends object = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<R[]>;
  /** Runs `work` in one transaction: committed when it resolves, rolled back when it throws. */
  transaction<T>(work: (tx: Db) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

const INT8_OID = 20;

/** A pool on a Postgres server. `int8` columns (byte sizes) come back as numbers, as PGlite's do. */
export function postgresDb(connectionString: string): Db {
  const pool = new pg.Pool({
    connectionString,
    max: 8,
    types: {
      getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
        oid === INT8_OID ? Number : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
    },
  });
  const over = (client: pg.Pool | pg.PoolClient): Omit<Db, 'transaction' | 'close'> => ({
    async query<R extends object>(sql: string, params: readonly unknown[] = []) {
      return (await client.query<R>(sql, params as unknown[])).rows;
    },
  });
  return {
    ...over(pool),
    async transaction(work) {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        const tx: Db = {
          ...over(client),
          transaction: (inner) => inner(tx),
          close: async () => {},
        };
        const result = await work(tx);
        await client.query('COMMIT');
        return result;
      } catch (e) {
        await client.query('ROLLBACK').catch(() => {});
        throw e;
      } finally {
        client.release();
      }
    },
    close: () => pool.end(),
  };
}

/** An embedded Postgres in `dataDir` (in memory when absent). Loaded only when asked for. */
export async function embeddedDb(dataDir?: string): Promise<Db> {
  const { PGlite } = await import('@electric-sql/pglite');
  const pglite = await PGlite.create(dataDir);
  type Queryable = Pick<typeof pglite, 'query'>;
  const over = (q: Queryable, transaction: Db['transaction'], close: Db['close']): Db => ({
    async query<R extends object>(sql: string, params: readonly unknown[] = []) {
      return (await q.query<R>(sql, params as unknown[])).rows;
    },
    transaction,
    close,
  });
  // PGlite has a single connection: a nested transaction joins the one that is open.
  const db: Db = over(
    pglite,
    (work) =>
      pglite.transaction(async (t) => {
        const tx: Db = over(
          t,
          (inner) => inner(tx),
          async () => {},
        );
        return work(tx);
      }),
    () => pglite.close(),
  );
  return db;
}
