/**
 * The server's GPU memory gauges (`GET /metrics`) as their text reads, from the store's rows on its
 * own database: what each GPU of each host holds by state, an instance on several GPUs an even share
 * on each, and each GPU's total, so what is free of it is one subtraction.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { LoadBoard } from '../gateway/loadBoard.js';
import { RequestQueue } from '../gateway/requestQueue.js';
import type { SharedQueueLimits } from '../settings/queue.js';
import { RoutingTable } from '../gateway/routingTable.js';
import { ServerMetrics } from '../server/metrics.js';
import { migrate } from '../store/migrate.js';
import { instanceOf, registerGpuHost } from './support/gpuRows.js';
import { type FreshDatabase, freshDatabase } from './support/postgres.js';

const GiB = 2 ** 30;

describe('the GPU memory on /metrics', () => {
  let fresh: FreshDatabase;
  let metrics: ServerMetrics;

  beforeAll(async () => {
    fresh = await freshDatabase(inject('postgresAdminUrl'));
    const { db } = fresh;
    await migrate(db);
    await registerGpuHost(db, 'box-4', { count: 4, gib: 80 });
    await registerGpuHost(db, 'small', { count: 1, gib: 24 });
    // 80 GiB ready over GPUs 1 and 2; 20 GiB of weights kept on GPU 2 while parked; a stopped one holds nothing.
    await instanceOf(db, 'wide', 'box-4', { gpuBytes: 80 * GiB, gpuIndexes: [1, 2] });
    await instanceOf(db, 'kept', 'box-4', {
      observedState: 'parked',
      parkTier: 'kv_only',
      gpuBytes: 20 * GiB,
      gpuIndexes: [2],
    });
    await instanceOf(db, 'gone', 'box-4', { observedState: 'stopped', gpuBytes: 0 });
    // From before the store named an instance's GPUs: on the one GPU its host has.
    await instanceOf(db, 'older', 'small', { gpuBytes: 10 * GiB });
    const table = new RoutingTable();
    const limits: SharedQueueLimits = {
      request_deadline: 30_000,
      max_pending_per_deployment: 64,
      max_pending_total: 256,
      max_buffered_bytes_total: 64 * 2 ** 20,
    };
    const queue = new RequestQueue({ limits: () => limits, onDemand: () => {} });
    metrics = new ServerMetrics({
      table,
      queue,
      board: new LoadBoard(),
      db,
      hosts: () => [],
      build: { version: '0.0.0-test', commit: undefined },
    });
  });
  afterAll(() => fresh?.drop());

  it('says what each GPU of each host holds, by state, and its total', async () => {
    const lines = (await metrics.registry.metrics()).split('\n').filter((l) => /^capyctl_gpu_memory/.test(l));
    const bytes = (gib: number) => String(gib * GiB);
    expect(lines).toEqual([
      `capyctl_gpu_memory_bytes{host="box-4",gpu="1",state="ready",park_tier="none"} ${bytes(40)}`,
      `capyctl_gpu_memory_bytes{host="box-4",gpu="2",state="ready",park_tier="none"} ${bytes(40)}`,
      `capyctl_gpu_memory_bytes{host="box-4",gpu="2",state="parked",park_tier="kv_only"} ${bytes(20)}`,
      `capyctl_gpu_memory_bytes{host="small",gpu="0",state="ready",park_tier="none"} ${bytes(10)}`,
      ...[0, 1, 2, 3].map((gpu) => `capyctl_gpu_memory_total_bytes{host="box-4",gpu="${gpu}"} ${bytes(80)}`),
      `capyctl_gpu_memory_total_bytes{host="small",gpu="0"} ${bytes(24)}`,
    ]);
  });
});
