/**
 * The switch list the status page reads (`GET /management/v1/switches`) and the page itself (`GET /`)
 * on the management listener: the switches newest first from their receipts, each with its phases
 * and its Temporal Web UI link, behind the admin token; the page served to anyone, holding no data.
 */
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { apiErrors, renderApiError } from '../domain/catalogue.js';
import { migrate } from '../store/migrate.js';
import { saveSwitchReceipt, type SwitchReceipt } from '../store/switchReceipts.js';
import { buildAdminApp } from './support/adminApp.js';
import { type FreshDatabase, freshDatabase } from './support/postgres.js';

const ADMIN_TOKEN = 'capy_admin_switch_list';
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
const WEB_UI = { url: 'http://temporal-ui.example:8080/', namespace: 'capy ns' };
const SWITCH_IDS = Array.from(
  { length: 25 },
  (_, i) => `0000000${i.toString().padStart(2, '0')}-0000-4000-8000-000000000000`,
);

const receipt = (n: number, more: Partial<SwitchReceipt> = {}): SwitchReceipt => ({
  switchId: SWITCH_IDS[n]!,
  hostId: 'gpu-box',
  targetDeploymentId: 'T',
  victims: [],
  outcome: 'released',
  summary: `switch number ${n}`,
  phases: [],
  // One a second, so the newest is the last written.
  startedAt: new Date(Date.UTC(2026, 11, 1, 12, 0, n)),
  finishedAt: new Date(Date.UTC(2026, 11, 1, 12, 0, n, 500)),
  ...more,
});

describe('the switch list and the status page', () => {
  let fresh: FreshDatabase;
  let app: FastifyInstance;

  beforeAll(async () => {
    fresh = await freshDatabase(inject('postgresAdminUrl'));
    await migrate(fresh.db);
    app = await buildAdminApp(fresh.db, { adminToken: ADMIN_TOKEN, webUi: WEB_UI });
    for (let n = 0; n < 23; n++) await saveSwitchReceipt(fresh.db, receipt(n));
    // The newest parked a victim to host RAM and woke its target; the one running has no phases yet.
    await saveSwitchReceipt(
      fresh.db,
      receipt(23, {
        targetDeploymentId: 'chat-b-id',
        victims: [{ deploymentId: 'chat-a-id', instanceIndex: 0, released: 'released: parked in host RAM' }],
        summary: 'wake chat-b, park chat-a on gpu-box',
        phases: [
          { phase: 'window', tier: null, ms: 0 },
          { phase: 'drain', tier: null, ms: 2 },
          { phase: 'park', tier: 'host_ram', ms: 1_250 },
          { phase: 'wake', tier: 'host_ram', ms: 900 },
          { phase: 'check', tier: 'host_ram', ms: 40 },
          { phase: 'release', tier: null, ms: 1 },
        ],
      }),
    );
    await saveSwitchReceipt(
      fresh.db,
      receipt(24, {
        targetDeploymentId: null,
        outcome: 'running',
        summary: 'park chat-b on gpu-box',
        finishedAt: null,
      }),
    );
  });
  afterAll(async () => {
    await app?.close();
    await fresh?.drop();
  });

  it('lists the latest 20 switches newest first, each with its phases and its Temporal Web UI link', async () => {
    const reply = await app.inject({ method: 'GET', url: '/management/v1/switches?limit=20', headers: admin });
    expect(reply.statusCode).toBe(200);
    const { switches } = reply.json();
    expect(switches.map((s: { summary: string }) => s.summary)).toEqual([
      'park chat-b on gpu-box',
      'wake chat-b, park chat-a on gpu-box',
      ...Array.from({ length: 18 }, (_, i) => `switch number ${22 - i}`),
    ]);
    expect(switches[0]).toEqual({
      switch_id: SWITCH_IDS[24],
      host_id: 'gpu-box',
      target: null,
      victims: [],
      outcome: 'running',
      summary: 'park chat-b on gpu-box',
      phases: [],
      started_at: '2026-12-01T12:00:24.000Z',
      finished_at: null,
      // The switch's own workflow, not a list filtered to it.
      web_ui_url: `http://temporal-ui.example:8080/namespaces/capy%20ns/workflows/switch%2F${SWITCH_IDS[24]}`,
    });
    // Names the table does not know (deleted deployments) stay IDs.
    expect(switches[1]).toMatchObject({
      target: { deployment_id: 'chat-b-id', name: 'chat-b-id' },
      victims: [
        { deployment_id: 'chat-a-id', name: 'chat-a-id', instance_index: 0, released: 'released: parked in host RAM' },
      ],
      outcome: 'released',
      phases: [
        { phase: 'window', park_tier: null, ms: 0 },
        { phase: 'drain', park_tier: null, ms: 2 },
        { phase: 'park', park_tier: 'host_ram', ms: 1_250 },
        { phase: 'wake', park_tier: 'host_ram', ms: 900 },
        { phase: 'check', park_tier: 'host_ram', ms: 40 },
        { phase: 'release', park_tier: null, ms: 1 },
      ],
      finished_at: '2026-12-01T12:00:23.500Z',
    });
  });

  it('lists 20 without a limit, takes a limit from 1 to 100, and refuses others', async () => {
    const list = (query: string) =>
      app.inject({ method: 'GET', url: `/management/v1/switches${query}`, headers: admin });
    expect((await list('')).json().switches).toHaveLength(20);
    expect((await list('?limit=100')).json().switches).toHaveLength(25);
    expect((await list('?limit=1')).json().switches.map((s: { switch_id: string }) => s.switch_id)).toEqual([
      SWITCH_IDS[24],
    ]);
    for (const bad of ['0', '101', 'ten', '2.5']) {
      const reply = await list(`?limit=${bad}`);
      expect(reply.statusCode, bad).toBe(400);
      expect(reply.json(), bad).toMatchObject({ code: 'invalid_request' });
    }
  });

  it('lists switches to the admin token only', async () => {
    for (const headers of [{}, { authorization: 'Bearer capy_admin_guessed' }]) {
      const reply = await app.inject({ method: 'GET', url: '/management/v1/switches', headers });
      expect(reply.statusCode).toBe(401);
      expect(reply.json()).toEqual(renderApiError(apiErrors.unauthorized('admin token')).body);
    }
  });

  it('serves the status page without a token: static HTML whose only script is its own, holding no data', async () => {
    const reply = await app.inject({ method: 'GET', url: '/' });
    expect(reply.statusCode).toBe(200);
    expect(reply.headers['content-type']).toBe('text/html; charset=utf-8');
    const csp = String(reply.headers['content-security-policy']);
    expect(csp).toMatch(
      /default-src 'none'; script-src 'sha256-[A-Za-z0-9+/]+=*'; style-src 'sha256-[A-Za-z0-9+/]+=*'; connect-src 'self'/,
    );
    expect(csp).toContain("frame-ancestors 'none'");
    expect(reply.body).toContain('<form id="login"');
    // Names come from users: the page builds its rows as text, never from HTML.
    expect(reply.body).not.toMatch(/innerHTML|outerHTML|insertAdjacentHTML|document\.write/);
    for (const data of ['gpu-box', 'switch number']) expect(reply.body).not.toContain(data);
  });
});
