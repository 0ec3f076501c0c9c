import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { type Db, embeddedDb } from '../store/db.js';
import {
  deleteDeployment,
  findDeployment,
  listDeployments,
  recordCheckpoint,
  recordMeasureFailure,
  recordProblem,
  saveDeployment,
  setOperatorStopped,
} from '../store/deployments.js';
import { findHost, issueHostToken, listHosts, registerHost, revokeHostToken } from '../store/hosts.js';
import { listInstances, saveInstance } from '../store/instances.js';
import { bundledMigrations, migrate } from '../store/migrate.js';
import { findSwitchReceipt, listSwitchReceipts, saveSwitchReceipt } from '../store/switchReceipts.js';
import { findWakeReference, recordWakeReference } from '../store/wakeReferences.js';
import { loadSettings } from '../settings/load.js';
import { type FreshDatabase, freshDatabase } from './support/postgres.js';

const ULID = /^[0-9A-HJKMNP-TV-Z]{26}$/;
const spec = (text: string) => loadSettings('deployment', { text });
const chatA = spec('name: chat-a\nengine: vllm\nmodel: Qwen3-4B\n');

/** Every table, column and index, to compare a schema before and after. */
const schemaOf = (db: Db) =>
  db.query(
    `SELECT table_name, column_name, data_type, is_nullable, column_default FROM information_schema.columns
     WHERE table_schema = 'public' ORDER BY table_name, column_name`,
  );

describe.each([
  ['Postgres', async () => freshDatabase(inject('postgresAdminUrl'))],
  [
    'PGlite',
    async (): Promise<FreshDatabase> => {
      const db = await embeddedDb();
      return { url: 'memory://', db, drop: () => db.close() };
    },
  ],
] as const)('migrations on %s', (_name, open) => {
  let fresh: FreshDatabase;
  beforeAll(async () => {
    fresh = await open();
  });
  afterAll(() => fresh.drop());

  it('apply to a fresh database, and a second time without change', async () => {
    const versions = bundledMigrations().map((m) => m.version);
    expect(versions.length).toBeGreaterThan(0);
    expect(await migrate(fresh.db)).toEqual(versions);
    const before = await schemaOf(fresh.db);
    expect(before.map((c) => c.table_name)).toEqual(
      expect.arrayContaining([
        'deployments',
        'deployment_revisions',
        'hosts',
        'instances',
        'wake_references',
        'switch_receipts',
      ]),
    );
    expect(await migrate(fresh.db)).toEqual([]);
    expect(await schemaOf(fresh.db)).toEqual(before);
    const applied = await fresh.db.query<{ version: string }>('SELECT version FROM schema_migrations ORDER BY version');
    expect(applied.map((r) => r.version)).toEqual(versions);
  });
});

describe('the store on Postgres', () => {
  let fresh: FreshDatabase;
  let db: Db;
  beforeAll(async () => {
    fresh = await freshDatabase(inject('postgresAdminUrl'));
    db = fresh.db;
    await migrate(db);
  });
  afterAll(() => fresh.drop());

  it('applies migrations once when several processes start together', async () => {
    const other = await freshDatabase(inject('postgresAdminUrl'));
    try {
      const runs = await Promise.all([migrate(other.db), migrate(other.db), migrate(other.db)]);
      // Each applied by exactly one of them; which one takes which depends on who gets the lock first.
      expect(runs.flat().sort()).toEqual(bundledMigrations().map((m) => m.version));
    } finally {
      await other.drop();
    }
  });

  it('gives a deployment a ULID and makes a new revision only for a changed spec', async () => {
    const created = await saveDeployment(db, chatA);
    expect(created.outcome).toBe('created');
    expect(created.deployment.id).toMatch(ULID);
    expect(created.deployment).toMatchObject({
      name: 'chat-a',
      revision: 1,
      spec: chatA,
      operatorStopped: false,
      checkpoint: null,
    });

    const again = await saveDeployment(db, spec('name: chat-a\nengine: vllm\nmodel: Qwen3-4B\n'));
    expect(again.outcome).toBe('unchanged');
    expect(again.deployment.revision).toBe(1);

    const changed = spec('name: chat-a\nengine: vllm\nmodel: Qwen3-8B\n');
    const revised = await saveDeployment(db, changed);
    expect(revised.outcome).toBe('revised');
    expect(revised.deployment).toMatchObject({ id: created.deployment.id, revision: 2, spec: changed });

    expect((await findDeployment(db, 'chat-a'))?.id).toBe(created.deployment.id);
    expect((await findDeployment(db, created.deployment.id))?.name).toBe('chat-a');
    expect(await findDeployment(db, 'nope')).toBeUndefined();
  });

  it('records a checkpoint measurement, an operator stop, and deletes', async () => {
    const { deployment } = await saveDeployment(db, spec('name: chat-b\nengine: sglang\nmodel: m\n'));
    await recordCheckpoint(db, deployment.id, 1, { weight_bytes: 8_000_000_000 });
    await setOperatorStopped(db, deployment.id, true);
    expect(await findDeployment(db, 'chat-b')).toMatchObject({
      checkpoint: { weight_bytes: 8_000_000_000 },
      operatorStopped: true,
    });
    expect((await listDeployments(db)).map((d) => d.name)).toEqual(['chat-a', 'chat-b']);
    expect(await deleteDeployment(db, deployment.id)).toBe(true);
    expect(await deleteDeployment(db, deployment.id)).toBe(false);
    expect((await listDeployments(db)).map((d) => d.name)).toEqual(['chat-a']);
  });

  it("records a deployment's last problem: each unasked ending a restart, the last three kept, the same problem twice once", async () => {
    const { deployment } = await saveDeployment(db, spec('name: crashy\nengine: vllm\nmodel: m\n'));
    const exited = (generation: number, minute: number) => ({
      kind: 'engine_exited' as const,
      at: new Date(Date.UTC(2026, 11, 6, 2, minute)).toISOString(),
      host_id: 'gpu-box',
      instance_index: 0,
      generation,
      message: 'its engine exited unasked (code 1)',
    });
    for (const g of [1, 2, 3, 4]) await recordProblem(db, deployment.id, exited(g, g));
    const endings = (d: Awaited<ReturnType<typeof findDeployment>>) => d!.recentEndings.map((t) => t.getUTCMinutes());
    const after = await findDeployment(db, 'crashy');
    expect(after).toMatchObject({ restarts: 4, lastProblem: exited(4, 4) });
    expect(endings(after)).toEqual([2, 3, 4]);
    // The same report again (an activity retried, a report sent twice) changes nothing.
    await recordProblem(db, deployment.id, exited(4, 9));
    const again = await findDeployment(db, 'crashy');
    expect(again).toMatchObject({ restarts: 4, lastProblem: exited(4, 4) });
    expect(endings(again)).toEqual([2, 3, 4]);
    // A failed park is a problem, not a restart.
    await recordProblem(db, deployment.id, { ...exited(5, 10), kind: 'park_failed', message: 'it has no POST /sleep' });
    expect(await findDeployment(db, 'crashy')).toMatchObject({ restarts: 4, lastProblem: { kind: 'park_failed' } });
    await deleteDeployment(db, deployment.id);
  });

  it('records why a measurement failed until the checkpoint is measured, and never over a measurement', async () => {
    const chatC = spec('name: chat-c\nengine: vllm\nmodel: /models/missing\n');
    const { deployment, measure } = await saveDeployment(db, chatC);
    expect(measure).toBe(true);
    const reason = 'checkpoint /models/missing is not on this host: neither a folder nor in the Hugging Face cache';
    await recordMeasureFailure(db, deployment.id, 1, reason);
    expect(await findDeployment(db, 'chat-c')).toMatchObject({ checkpoint: null, measureFailure: reason });
    // Deployed again unchanged: another try, the failure forgotten.
    expect(await saveDeployment(db, chatC)).toMatchObject({
      outcome: 'unchanged',
      measure: true,
      deployment: { revision: 1, measureFailure: null },
    });
    expect(await saveDeployment(db, chatC)).toMatchObject({ outcome: 'unchanged', measure: false });
    await recordMeasureFailure(db, deployment.id, 1, reason);
    await recordMeasureFailure(db, deployment.id, 1, null);
    expect(await findDeployment(db, 'chat-c')).toMatchObject({ checkpoint: null, measureFailure: null });

    await recordMeasureFailure(db, deployment.id, 1, reason);
    await recordCheckpoint(db, deployment.id, 1, { weight_bytes: 1_000 });
    expect(await findDeployment(db, 'chat-c')).toMatchObject({
      checkpoint: { weight_bytes: 1_000 },
      measureFailure: null,
    });
    await recordMeasureFailure(db, deployment.id, 1, reason);
    expect(await findDeployment(db, 'chat-c')).toMatchObject({
      checkpoint: { weight_bytes: 1_000 },
      measureFailure: null,
    });
    await deleteDeployment(db, deployment.id);
  });

  it('registers a host only with a token it issued, bound to one host', async () => {
    const token = await issueHostToken(db);
    const gpus = [{ index: 0, name: 'sim-0', memoryBytes: 24 * 2 ** 30, memoryKind: 'discrete' as const }];
    const host = { id: 'gpu-box', gpus, hostRamBytes: 64 * 2 ** 30, settings: { activation: 'on_demand' } };
    expect(await registerHost(db, 'capy_host_unknown', host)).toBe('unknown_token');
    expect(await registerHost(db, token, host)).toBe('registered');
    expect(await registerHost(db, token, host)).toBe('registered');
    expect(await registerHost(db, token, { ...host, id: 'other-box' })).toBe('token_bound_to_another_host');
    const another = await issueHostToken(db);
    expect(await registerHost(db, another, host)).toBe('host_bound_to_another_token');
    // Re-binding is the operator's act: revoke, then a fresh token registers the host.
    expect(await revokeHostToken(db, 'gpu-box')).toBe(1);
    expect(await registerHost(db, token, host)).toBe('unknown_token');
    expect(await registerHost(db, another, host)).toBe('registered');
    expect(await findHost(db, 'gpu-box')).toMatchObject({ gpus, hostRamBytes: 64 * 2 ** 30, draining: false });
    expect((await listHosts(db)).map((h) => h.id)).toEqual(['gpu-box']);
  });

  it('keeps an instance at its newest generation', async () => {
    const chat = (await findDeployment(db, 'chat-a'))!;
    const base = {
      deploymentId: chat.id,
      index: 0,
      hostId: 'gpu-box',
      gpuBytes: 9 * 2 ** 30,
      hostRamBytes: 0,
      parkTier: null,
    };
    await saveInstance(db, { ...base, generation: 2, observedState: 'ready' });
    await saveInstance(db, { ...base, generation: 1, observedState: 'stopped' });
    expect(await listInstances(db, { deploymentId: chat.id })).toMatchObject([
      { generation: 2, observedState: 'ready' },
    ]);
    await saveInstance(db, {
      ...base,
      generation: 2,
      observedState: 'parked',
      parkTier: 'host_ram',
      gpuBytes: 0,
      hostRamBytes: 8 * 2 ** 30,
    });
    expect(await listInstances(db, { hostId: 'gpu-box' })).toMatchObject([
      { observedState: 'parked', parkTier: 'host_ram', hostRamBytes: 8 * 2 ** 30 },
    ]);
  });

  it('records the GPUs each instance holds; a row from before the store recorded them reads as not known', async () => {
    const other = await freshDatabase(inject('postgresAdminUrl'));
    try {
      // Those after it too: saving a deployment reads the deployments' columns they add.
      const before = bundledMigrations().filter((m) => !m.version.startsWith('0008'));
      await migrate(other.db, before);
      const { deployment } = await saveDeployment(other.db, chatA);
      await registerHost(other.db, await issueHostToken(other.db), {
        id: 'gpu-box',
        gpus: [],
        hostRamBytes: null,
        settings: {},
      });
      await other.db.query(
        `INSERT INTO instances (deployment_id, instance_index, host_id, generation, observed_state, gpu_bytes)
         VALUES ($1, 0, 'gpu-box', 1, 'ready', $2)`,
        [deployment.id, 9 * 2 ** 30],
      );
      await migrate(other.db);
      expect(await listInstances(other.db)).toMatchObject([{ observedState: 'ready', gpuIndexes: [] }]);
      const wide = {
        deploymentId: deployment.id,
        index: 0,
        hostId: 'gpu-box',
        generation: 2,
        observedState: 'ready' as const,
        parkTier: null,
        gpuBytes: 80 * 2 ** 30,
        hostRamBytes: 0,
      };
      await saveInstance(other.db, { ...wide, gpuIndexes: [2, 5] });
      expect(await listInstances(other.db)).toMatchObject([
        { generation: 2, gpuBytes: 80 * 2 ** 30, gpuIndexes: [2, 5] },
      ]);
      // A step scheduled before the store recorded them says none: not known.
      await saveInstance(other.db, { ...wide, generation: 3 });
      expect(await listInstances(other.db)).toMatchObject([{ generation: 3, gpuIndexes: [] }]);
    } finally {
      await other.drop();
    }
  });

  it('keeps the first answer of a generation and replaces it after a restart', async () => {
    const chat = (await findDeployment(db, 'chat-a'))!;
    const ref = { deploymentId: chat.id, instanceIndex: 0, revision: 2, probe: { prompt: 'p' } };
    await recordWakeReference(db, { ...ref, generation: 2, answer: { text: 'first' } });
    await recordWakeReference(db, { ...ref, generation: 2, answer: { text: 'retry' } });
    expect((await findWakeReference(db, chat.id, 0))?.answer).toEqual({ text: 'first' });
    await recordWakeReference(db, { ...ref, generation: 3, answer: { text: 'after restart' } });
    expect(await findWakeReference(db, chat.id, 0)).toMatchObject({ generation: 3, answer: { text: 'after restart' } });
  });

  it('writes a switch receipt idempotently', async () => {
    const receipt = {
      switchId: '01M3R7A6YJW402N962HH17A66X',
      hostId: 'gpu-box',
      targetDeploymentId: 'T',
      victims: [{ deploymentId: 'V', instanceIndex: 0, released: 'released: stopped (no room to park)' }],
      outcome: 'running' as const,
      summary: 'wake chat-b, park chat-a on gpu-box',
      phases: [],
      startedAt: new Date('2026-11-29T12:00:00Z'),
      finishedAt: null,
    };
    const phases = [
      { phase: 'park' as const, tier: 'host_ram' as const, ms: 1_200 },
      { phase: 'release' as const, tier: null, ms: 3 },
    ];
    expect(await saveSwitchReceipt(db, receipt)).toBe(false);
    const final = { ...receipt, outcome: 'released' as const, phases, finishedAt: new Date('2026-11-29T12:00:05Z') };
    expect(await saveSwitchReceipt(db, final)).toBe(true);
    // Run again (a retry, a replay), the final write ends nothing more, and a late "running" changes nothing.
    expect(await saveSwitchReceipt(db, final)).toBe(false);
    expect(await saveSwitchReceipt(db, receipt)).toBe(false);
    expect(await findSwitchReceipt(db, receipt.switchId)).toEqual({
      ...receipt,
      outcome: 'released',
      phases,
      finishedAt: new Date('2026-11-29T12:00:05Z'),
    });
    expect(await listSwitchReceipts(db, { targetDeploymentId: 'T' })).toHaveLength(1);
    // The status page's hour: only receipts that finished since then (one still running never did).
    const since = (iso: string) => listSwitchReceipts(db, { targetDeploymentId: 'T', finishedSince: new Date(iso) });
    expect((await since('2026-11-29T12:00:05Z')).map((r) => r.switchId)).toEqual([receipt.switchId]);
    expect(await since('2026-11-29T12:00:06Z')).toEqual([]);
  });
});
