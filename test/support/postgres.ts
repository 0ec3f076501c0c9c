/** The machine's Postgres (127.0.0.1:5432, trust auth), started when it is not running. */
import { execSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { type Db, postgresDb } from '../../store/db.js';

export const POSTGRES_ADMIN_URL =
  process.env.CAPYCTL_TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/** Null when Postgres answers; else why not. */
async function unreachable(): Promise<string | null> {
  const client = new pg.Client({ connectionString: POSTGRES_ADMIN_URL, connectionTimeoutMillis: 2_000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
    return null;
  } catch (e) {
    return String(e);
  } finally {
    await client.end().catch(() => {});
  }
}

export async function ensurePostgres(): Promise<void> {
  if ((await unreachable()) === null) return;
  try {
    execSync('pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql | sort -V | tail -n 1) main start', {
      stdio: 'inherit',
    });
  } catch (e) {
    // Exit status 2: it runs already, and was only slow to answer (a loaded machine): ask again.
    if ((e as { status?: number }).status !== 2) throw e;
  }
  let why: string | null = null;
  for (let i = 0; i < 50; i++) {
    why = await unreachable();
    if (why === null) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`Postgres at ${POSTGRES_ADMIN_URL} did not come up: ${why}`);
}

export interface FreshDatabase {
  url: string;
  db: Db;
  /** Closes the pool and drops the database. */
  drop(): Promise<void>;
}

/** A new empty database for one test file. */
export async function freshDatabase(adminUrl: string): Promise<FreshDatabase> {
  const name = `capyctl_test_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  const db = postgresDb(url.toString());
  return {
    url: url.toString(),
    db,
    async drop() {
      await db.close();
      const client = new pg.Client({ connectionString: adminUrl });
      await client.connect();
      // The pool's end() returns before its connections have closed; a FORCE drop at once kills them
      // mid-goodbye and their client raises an unhandled FATAL. So a plain drop is retried first.
      for (let attempt = 0; ; attempt++) {
        try {
          await client.query(`DROP DATABASE IF EXISTS ${name}${attempt < 20 ? '' : ' WITH (FORCE)'}`);
          break;
        } catch (e) {
          if (attempt >= 20) throw e;
          await new Promise((r) => setTimeout(r, 50));
        }
      }
      await client.end();
    },
  };
}
