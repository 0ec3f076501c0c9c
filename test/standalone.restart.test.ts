/**
 * The standalone stopped with SIGTERM in the middle of a switch: the answer it was running finishes,
 * the request waiting for the switch is answered, the process exits within the drain bound; a new
 * start settles that switch and has lost no deployment.
 */
import { chmodSync, mkdtempSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { switchOutcomes } from '../domain/vocabulary.js';
import type { SwitchResult } from '../api/lifecycle.js';
import { isRunning } from './support/processes.js';
import { type StandaloneProcess, startStandaloneProcess } from './support/standalone.js';
import { until } from './support/until.js';

const DRAIN_MS = 10_000;

interface Reply {
  status: number;
  body: string;
  endedAtMs: number;
}

/** A chat completion; streamed, its body is every event the client read. */
async function chat(url: string, model: string, maxTokens: number, stream = false): Promise<Reply> {
  const reply = await request(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      model,
      messages: [{ role: 'user', content: 'tell me about capybaras' }],
      max_tokens: maxTokens,
      stream,
    }),
  });
  const body = await reply.body.text();
  return { status: reply.statusCode, body, endedAtMs: Date.now() };
}

const contentTokens = (events: string) =>
  events
    .split('\n')
    .filter((l) => l.startsWith('data: {'))
    .map(
      (l) =>
        (JSON.parse(l.slice(6)) as { choices: Array<{ delta: { content?: string } }> }).choices[0]?.delta.content ?? '',
    )
    .filter((c) => c !== '').length;

describe('a standalone stopped in the middle of a switch', () => {
  let client: Client;
  let standalone: StandaloneProcess | undefined;
  const dir = mkdtempSync(join(tmpdir(), 'capyctl-standalone-'));
  const sets = [`server.switching.drain_timeout=${DRAIN_MS / 1000}s`];

  beforeAll(async () => {
    client = new Client({ connection: await Connection.connect({ address: inject('temporalAddress') }) });
  });
  afterAll(async () => {
    await standalone?.stop();
    await client?.connection.close();
  });

  const deploymentIds = async (s: StandaloneProcess) => {
    const reply = await request(`${s.managementUrl}/management/v1/metrics/load`, {
      headers: { authorization: `Bearer ${s.adminToken}` },
    });
    const body = (await reply.body.json()) as { deployments: Array<{ deployment_id: string; name: string }> };
    return Object.fromEntries(body.deployments.map((d) => [d.name, d.deployment_id]));
  };

  it(
    'finishes the running answer, answers the waiting request, exits, and the next start settles the switch',
    { timeout: 240_000 },
    async () => {
      const temporalAddress = inject('temporalAddress');
      const first = await startStandaloneProcess({ temporalAddress, dir, sets });
      standalone = first;
      const ids = await deploymentIds(first);
      expect(Object.keys(ids).sort()).toEqual(['chat-a', 'chat-b']);
      expect((await chat(first.inferenceUrl, 'chat-a', 4)).status).toBe(200);

      // A long answer from chat-a (240 tokens at the example's 40 a second), then a request for
      // chat-b, which begins a switch that must wait for that answer.
      const long = chat(first.inferenceUrl, 'chat-a', 240, true);
      await new Promise((r) => setTimeout(r, 300));
      const waiting = chat(first.inferenceUrl, 'chat-b', 4);
      const switchId = await until(
        'the switch to chat-b to begin',
        async () => {
          for await (const w of client.workflow.list({
            query: `CapyHost = '${first.hostId}' AND CapyTarget = 'chat-b'`,
          }))
            return w.workflowId;
          return undefined;
        },
        30_000,
      );

      const stoppedAt = Date.now();
      first.child.kill('SIGTERM');
      const answer = await long;
      expect(answer.status).toBe(200);
      // The stop waited for it.
      expect(answer.endedAtMs).toBeGreaterThan(stoppedAt);
      expect(contentTokens(answer.body)).toBe(240);
      expect(answer.body.trimEnd().endsWith('data: [DONE]')).toBe(true);
      expect(await waiting).toMatchObject({
        status: 503,
        body: JSON.stringify({
          code: 'unavailable',
          message: `dispatch to deployment ${ids['chat-b']} is closed; retry shortly`,
          retryable: true,
        }),
      });
      expect(await first.exited).toBe(0);
      expect(Date.now() - stoppedAt).toBeLessThan(DRAIN_MS + 20_000);

      const second = await startStandaloneProcess({ temporalAddress, dir, hostId: first.hostId, sets });
      standalone = second;
      const result = (await client.workflow.getHandle(switchId).result()) as SwitchResult;
      expect(switchOutcomes.options).toContain(result.outcome);
      expect(result.outcome).not.toBe('running');
      expect(await deploymentIds(second)).toEqual(ids);

      for (const model of ['chat-b', 'chat-a']) {
        const reply = await chat(second.inferenceUrl, model, 4);
        expect(reply.status, reply.body).toBe(200);
        expect(JSON.parse(reply.body)).toMatchObject({ model, choices: [{ finish_reason: 'length' }] });
      }
      expect(await second.stop()).toBe(0);
    },
  );
});

describe('a standalone killed outright (SIGKILL)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'capyctl-standalone-'));
  let standalone: StandaloneProcess | undefined;
  let client: Client;
  beforeAll(async () => {
    client = new Client({ connection: await Connection.connect({ address: inject('temporalAddress') }) });
  });
  afterAll(async () => {
    await standalone?.stop();
    await client?.connection.close();
  });

  it('takes its engines with it, so the next start has the whole GPU', { timeout: 180_000 }, async () => {
    const temporalAddress = inject('temporalAddress');
    const first = await startStandaloneProcess({ temporalAddress, dir });
    standalone = first;
    expect((await chat(first.inferenceUrl, 'chat-a', 4)).status).toBe(200);
    const engines = first
      .output()
      .split('\n')
      .filter((line) => line.includes('"engine launched"'))
      .map((line) => (JSON.parse(line) as { pid: number }).pid);
    expect(engines).toHaveLength(1);
    expect(isRunning(engines[0]!)).toBe(true);
    // The kill comes after chat-a's start has finished (it records chat-a ready just after the answer).
    const running = `CapyHost = '${first.hostId}' AND ExecutionStatus = 'Running'`;
    await until('chat-a’s start to finish', async () => {
      for await (const _ of client.workflow.list({ query: running })) return undefined;
      return true;
    });

    first.child.kill('SIGKILL');
    await first.exited;
    await until('the killed standalone’s engine to end', () => (engines.some(isRunning) ? undefined : true), 10_000);

    // Left readable by others meanwhile: the next start makes the admin token its owner's again, and says so.
    chmodSync(first.adminTokenFile, 0o644);
    // chat-a's 5 GiB no longer held by a stray engine, the 8 GiB card takes chat-b's 5 GiB.
    const second = await startStandaloneProcess({ temporalAddress, dir, hostId: first.hostId });
    standalone = second;
    expect(statSync(second.adminTokenFile).mode & 0o777).toBe(0o600);
    expect(second.adminToken).toBe(first.adminToken);
    expect(second.output()).toContain(
      '"msg":"the admin token file could be read by other users; it is now its owner’s only (0600)',
    );
    const reply = await chat(second.inferenceUrl, 'chat-b', 4);
    expect(reply.status, reply.body).toBe(200);
    expect(await second.stop()).toBe(0);
  });
});
