/**
 * One real Temporal dev server and a running Postgres for the whole run; their addresses reach the
 * test files through `inject('temporalAddress')` and `inject('postgresAdminUrl')`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type {} from 'vitest';
import type { TestProject } from 'vitest/node';
import { startDevServer } from '../../standalone/temporalDevServer.js';
import { ensurePostgres, POSTGRES_ADMIN_URL } from './postgres.js';

declare module 'vitest' {
  export interface ProvidedContext {
    temporalAddress: string;
    postgresAdminUrl: string;
  }
}

export default async function setup(project: TestProject) {
  const dir = mkdtempSync(join(tmpdir(), 'capyctl-test-'));
  const [temporal] = await Promise.all([
    startDevServer({ dbFile: join(dir, 'temporal.db'), logFile: join(dir, 'temporal.log') }),
    ensurePostgres(),
  ]);
  project.provide('temporalAddress', temporal.address);
  project.provide('postgresAdminUrl', POSTGRES_ADMIN_URL);
  return async () => {
    await temporal.stop();
    rmSync(dir, { recursive: true, force: true });
  };
}
