/**
 * Overload over real processes: ten times the queue's bounds, across three models that share one
 * GPU (so they switch while the requests pile up). Every request is answered: its reply, the spec's
 * 429 with `Retry-After: 1`, or a retryable 503; the server's memory stays bounded.
 */
import { readFileSync } from 'node:fs';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Cluster } from './support/cluster.js';
import { simDeployment } from './support/lifecycle.js';

const MODELS = ['load-a', 'load-b', 'load-c'];
const PER_DEPLOYMENT = 8;
const TOTAL = 16;
/** Ten times the total bound, spread over the models. */
const REQUESTS = 10 * TOTAL;
const MiB = 2 ** 20;

const rssOf = (pid: number) =>
  Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) * 1_024;

describe('ten times the queue bounds across three models', () => {
  let cluster: Cluster;

  beforeAll(async () => {
    cluster = await Cluster.start({
      hosts: [
        {
          yaml: `resource_policy: { queue: { max_pending_per_deployment: ${PER_DEPLOYMENT}, max_pending_total: ${TOTAL}, request_deadline: 60s, admission_window: 200ms } }`,
        },
      ],
    });
    for (const name of MODELS) await cluster.deploy(simDeployment(name));
  }, 180_000);

  afterAll(async () => {
    await cluster?.close();
  });

  it('answers every request: 200, 429 with Retry-After: 1, or a retryable 503; and the server’s memory stays bounded', async () => {
    const pid = cluster.server.child.pid!;
    const before = rssOf(pid);
    let peak = before;
    const sampler = setInterval(() => (peak = Math.max(peak, rssOf(pid))), 100);

    const outcomes = await Promise.all(
      Array.from({ length: REQUESTS }, async (_, i) => {
        const model = MODELS[i % MODELS.length]!;
        try {
          const reply = await request(`${cluster.inferenceUrl}/v1/chat/completions`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ model, messages: [{ role: 'user', content: `overload ${i}` }], max_tokens: 4 }),
            // Past the request deadline and a switch: a request still unanswered then was lost.
            headersTimeout: 120_000,
            bodyTimeout: 120_000,
          });
          const body = (await reply.body.json()) as { code?: string; retryable?: boolean; model?: string };
          return { status: reply.statusCode, retryAfter: reply.headers['retry-after'], body };
        } catch (e) {
          return { status: 0, retryAfter: undefined, body: { code: `no answer: ${(e as Error).message}` } };
        }
      }),
    );
    clearInterval(sampler);
    const after = rssOf(pid);

    const count = (status: number) => outcomes.filter((o) => o.status === status).length;
    const summary = {
      ok: count(200),
      queueFull: count(429),
      unavailable: count(503),
      other: outcomes.filter((o) => ![200, 429, 503].includes(o.status)),
    };
    console.info(
      `overload: ${JSON.stringify({ ...summary, other: summary.other.length })}; server RSS ${(before / MiB).toFixed(0)} → peak ${(peak / MiB).toFixed(0)} → ${(after / MiB).toFixed(0)} MiB`,
    );

    expect(summary.other).toEqual([]);
    expect(summary.ok).toBeGreaterThan(0);
    // More arrive at once than may wait: the bound refuses some, as the spec's 429.
    expect(summary.queueFull).toBeGreaterThan(0);
    for (const o of outcomes.filter((x) => x.status === 429))
      expect(o).toMatchObject({ retryAfter: '1', body: { code: 'queue_full', retryable: true } });
    for (const o of outcomes.filter((x) => x.status === 503))
      expect(o.body).toMatchObject({ code: 'unavailable', retryable: true });
    for (const o of outcomes.filter((x) => x.status === 200)) expect(MODELS).toContain(o.body.model);
    // 160 requests of a few hundred bytes: the server's memory moves by far less than this.
    expect(peak - before).toBeLessThan(150 * MiB);

    // And it still serves once the storm has passed.
    expect((await cluster.chat('load-a')).status).toBe(200);
  }, 240_000);
});
