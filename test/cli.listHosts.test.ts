/**
 * `capyctl list hosts` as an operator reads it, run as a child process against the management
 * listener on its own database: each GPU's memory used and its total, counted per GPU from the
 * store's rows (an instance on several GPUs an even share on each).
 */
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { migrate } from '../store/migrate.js';
import { buildAdminApp } from './support/adminApp.js';
import { capyctl } from './support/capyctl.js';
import { instanceOf, registerGpuHost } from './support/gpuRows.js';
import { type FreshDatabase, freshDatabase } from './support/postgres.js';

const ADMIN_TOKEN = 'capy_admin_list_hosts';
const GiB = 2 ** 30;

describe('capyctl list hosts', () => {
  let fresh: FreshDatabase;
  let app: FastifyInstance;
  let url: string;

  beforeAll(async () => {
    fresh = await freshDatabase(inject('postgresAdminUrl'));
    const { db } = fresh;
    await migrate(db);
    await registerGpuHost(db, 'box-8', { count: 8, gib: 80 }, 1024 * GiB);
    await registerGpuHost(db, 'spark', { count: 1, gib: 24, kind: 'unified' });
    // 80 GiB over GPUs 0 and 1, 40 GiB on GPU 2; on spark one row from before the store named its GPUs.
    await instanceOf(db, 'wide', 'box-8', { gpuBytes: 80 * GiB, gpuIndexes: [0, 1] });
    await instanceOf(db, 'narrow', 'box-8', { gpuBytes: 40 * GiB, gpuIndexes: [2] });
    await instanceOf(db, 'older', 'spark', { gpuBytes: 10 * GiB });
    app = await buildAdminApp(db, { adminToken: ADMIN_TOKEN });
    url = await app.listen({ host: '127.0.0.1', port: 0 });
  });
  afterAll(async () => {
    await app?.close();
    await fresh?.drop();
  });

  const listHosts = (...more: string[]) =>
    capyctl(['list', 'hosts', ...more], { CAPYCTL_SERVER: url, CAPYCTL_ADMIN_TOKEN: ADMIN_TOKEN });

  it('shows each GPU’s memory used and its total, an instance on two GPUs half on each', async () => {
    const listed = await listHosts();
    expect(listed).toMatchObject({ code: 0, stderr: '' });
    const gpus8 = `40GiB/80GiB, 40GiB/80GiB, 40GiB/80GiB, ${Array(5).fill('0B/80GiB').join(', ')} discrete`;
    const pad = (text: string) => text.padEnd(gpus8.length);
    expect(listed.stdout.replace(/\d+s ago/g, 'Ns ago')).toBe(
      [
        `ID      ${pad('GPUS (USED/TOTAL)')}   HOST RAM   STATE   LAST SEEN`,
        `box-8   ${gpus8}   1TiB       ready   Ns ago`,
        `spark   ${pad('10GiB/24GiB unified')}   -          ready   Ns ago`,
        '',
      ].join('\n'),
    );
  });

  it('gives each GPU its used bytes in JSON', async () => {
    const listed = await listHosts('--json');
    expect(listed.code).toBe(0);
    const hosts = JSON.parse(listed.stdout) as Array<{ host_id: string; gpus: Array<{ used_bytes: number }> }>;
    expect(hosts.map((h) => [h.host_id, h.gpus.map((g) => g.used_bytes / GiB)])).toEqual([
      ['box-8', [40, 40, 40, 0, 0, 0, 0, 0]],
      ['spark', [10]],
    ]);
  });
});
