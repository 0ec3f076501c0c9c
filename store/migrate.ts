/**
 * Applies store/migrations/*.sql in name order, each once, each in its own transaction. Safe to
 * run from several processes at start: an advisory lock makes them take turns.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Db } from './db.js';

// From the root's level, not this folder's: the same in the sources and in the CLI's build (bin/cliBundle.js).
const MIGRATIONS_DIR = fileURLToPath(new URL('../store/migrations/', import.meta.url));
const LOCK_KEY = 7_443_001;

export interface Migration {
  version: string;
  sql: string;
}

export function bundledMigrations(): Migration[] {
  return readdirSync(MIGRATIONS_DIR)
    .filter((f) => f.endsWith('.sql'))
    .sort()
    .map((f) => ({ version: f.replace(/\.sql$/, ''), sql: readFileSync(MIGRATIONS_DIR + f, 'utf8') }));
}

/** Returns the versions it applied now (empty when the database was up to date). */
export async function migrate(db: Db, migrations: readonly Migration[] = bundledMigrations()): Promise<string[]> {
  const applied: string[] = [];
  for (const m of migrations) {
    const ran = await db.transaction(async (tx) => {
      await tx.query('SELECT pg_advisory_xact_lock($1)', [LOCK_KEY]);
      await tx.query(
        `CREATE TABLE IF NOT EXISTS schema_migrations
         (version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`,
      );
      const done = await tx.query('SELECT 1 FROM schema_migrations WHERE version = $1', [m.version]);
      if (done.length > 0) return false;
      for (const statement of splitStatements(m.sql)) await tx.query(statement);
      await tx.query('INSERT INTO schema_migrations (version) VALUES ($1)', [m.version]);
      return true;
    });
    if (ran) applied.push(m.version);
  }
  return applied;
}

/** Splits a migration at the semicolons that end its statements (migrations use no `$$` bodies). */
function splitStatements(sql: string): string[] {
  return sql
    .replace(/--.*$/gm, '')
    .split(';')
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
}
