/**
 * capyctl on the Temporal server itself (issue 16), not the CLI's dev server: the server built from
 * its Go module, on its own Postgres databases with the SQL visibility store. A capyctl server and
 * two host agents, each its own process, switch models; the Temporal server is restarted (SIGTERM,
 * then SIGKILL) on the same databases and ports in the middle of a switch, and the waiting request
 * is still answered; the switches are found through Temporal's visibility by their search attributes.
 */
import { Client, Connection, type WorkflowExecutionInfo } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { searchAttributes } from '../workflows/definitions.js';
import { type ApiReply, Cluster, type ClusterHost } from './support/cluster.js';
import { simDeployment } from './support/lifecycle.js';
import { TemporalCluster } from './support/temporalCluster.js';
import { until } from './support/until.js';

/** The phases a restart lands in last this long: chat-a parks, chat-b wakes. */
const SLOW_MS = '3000';
/** The host's request deadline: a request waiting out a restart is answered within it (spec, "Bounds"). */
const REQUEST_DEADLINE_MS = 120_000;
/** A restart on Postgres takes seconds; far past this the cluster would be of no use to anyone. */
const RESTART_BOUND_MS = 30_000;

describe('capyctl on the Temporal server with Postgres persistence', () => {
  let temporal: TemporalCluster;
  let cluster: Cluster;
  let client: Client;
  let host1: ClusterHost;
  let host2: ClusterHost;
  /** The switches to chat-b this file made, each of which parked chat-a on host 1. */
  let switchesToB = 0;

  beforeAll(async () => {
    const postgresAdminUrl = inject('postgresAdminUrl');
    temporal = await TemporalCluster.start({ postgresAdminUrl });
    cluster = await Cluster.start({
      services: { temporalAddress: temporal.address, postgresAdminUrl },
      hosts: [
        { yaml: `resource_policy: { queue: { admission_window: 500ms, request_deadline: ${REQUEST_DEADLINE_MS}ms } }` },
        { yaml: `resource_policy: { queue: { admission_window: 500ms, request_deadline: ${REQUEST_DEADLINE_MS}ms } }` },
      ],
    });
    [host1, host2] = cluster.hosts as [ClusterHost, ClusterHost];
    // chat-a and chat-b share host 1's card (one at a time: they switch); chat-c has host 2's.
    const on = (host: ClusterHost) => `hosts: [${host.hostId}]\n`;
    await cluster.deploy(simDeployment('chat-a', 'vllm', ['--sim-park-ms', SLOW_MS], on(host1)));
    await cluster.deploy(simDeployment('chat-b', 'vllm', ['--sim-wake-ms', SLOW_MS], on(host1)));
    await cluster.deploy(simDeployment('chat-c', 'vllm', [], on(host2)));
    client = new Client({
      connection: await Connection.connect({ address: temporal.address }),
      namespace: temporal.namespace,
    });
  }, 240_000);

  afterAll(async () => {
    await client?.connection.close();
    await cluster?.close();
    await temporal?.close();
  });

  const stateOf = async (name: string): Promise<string> => (await cluster.status(name)).state;
  const becomes = (name: string, state: string) =>
    until(`${name} ${state}`, async () => ((await stateOf(name)) === state ? true : undefined), 60_000);

  /** chat-a serving, chat-b parked: the next request for chat-b makes a switch on host 1. */
  async function aServes() {
    expect((await cluster.chat('chat-a')).status).toBe(200);
    expect(await stateOf('chat-a')).toBe('ready');
  }

  /**
   * A request for chat-b makes the switch; when `who` shows `phase`, the Temporal server is stopped
   * with `signal` and started again. Resolves with the request's answer, when it came, when Temporal
   * was signalled, and how long it was away.
   */
  async function restartDuringSwitch(who: string, phase: string, signal: 'SIGTERM' | 'SIGKILL') {
    const sentAt = Date.now();
    const reply = cluster.chat('chat-b').then((r: ApiReply) => ({ reply: r, atMs: Date.now() }));
    switchesToB++;
    await becomes(who, phase);
    const signalledAt = Date.now();
    const awayMs = await temporal.restart(signal);
    return { ...(await reply), sentAt, signalledAt, awayMs };
  }

  it(
    'switches models on a host and serves the other host: every request is answered 200',
    { timeout: 120_000 },
    async () => {
      expect((await cluster.chat('chat-c')).status).toBe(200);
      await aServes();
      // chat-b starts in chat-a's place (chat-a parks), then chat-a is woken in chat-b's place.
      expect((await cluster.chat('chat-b')).status).toBe(200);
      switchesToB++;
      expect({ a: await stateOf('chat-a'), b: await stateOf('chat-b') }).toEqual({ a: 'parked', b: 'ready' });
      await aServes();
      expect(await stateOf('chat-b')).toBe('parked');
      expect((await cluster.status('chat-c')).hosts).toEqual([host2.hostId]);
    },
  );

  it(
    'a switch during which the Temporal server is stopped (SIGTERM) and started again completes: its waiting request is answered 200',
    { timeout: 180_000 },
    async () => {
      await aServes();
      const { reply, atMs, sentAt, signalledAt, awayMs } = await restartDuringSwitch('chat-a', 'parking', 'SIGTERM');
      expect(reply.status, JSON.stringify(reply.body)).toBe(200);
      // chat-b's wake comes after chat-a's park: the answer cannot have come before Temporal went away.
      expect(atMs).toBeGreaterThan(signalledAt);
      expect(atMs - sentAt).toBeLessThan(REQUEST_DEADLINE_MS);
      expect(awayMs).toBeLessThan(RESTART_BOUND_MS);
      expect({ a: await stateOf('chat-a'), b: await stateOf('chat-b') }).toEqual({ a: 'parked', b: 'ready' });
    },
  );

  it(
    'a switch during which the Temporal server is killed (SIGKILL) and started again completes: its waiting request is answered 200',
    { timeout: 180_000 },
    async () => {
      await aServes();
      const { reply, atMs, sentAt, signalledAt, awayMs } = await restartDuringSwitch('chat-b', 'waking', 'SIGKILL');
      expect(reply.status, JSON.stringify(reply.body)).toBe(200);
      expect(atMs).toBeGreaterThan(signalledAt);
      expect(atMs - sentAt).toBeLessThan(REQUEST_DEADLINE_MS);
      expect(awayMs).toBeLessThan(RESTART_BOUND_MS);
      expect({ a: await stateOf('chat-a'), b: await stateOf('chat-b') }).toEqual({ a: 'parked', b: 'ready' });
      // And both hosts serve on after it.
      await aServes();
      expect((await cluster.chat('chat-c')).status).toBe(200);
    },
  );

  it(
    "the switches are found through Temporal's visibility by their search attributes",
    { timeout: 60_000 },
    async () => {
      const list = async (query: string) => {
        const found: WorkflowExecutionInfo[] = [];
        for await (const workflow of client.workflow.list({ query })) found.push(workflow);
        return found;
      };
      // Visibility is written a moment after the workflow: the last switch's outcome may still be on its way.
      const toB = await until('every switch to chat-b, ended, in visibility', async () => {
        const found = await list(`CapyTarget = 'chat-b' AND CapyOutcome = 'released'`);
        return found.length === switchesToB ? found : undefined;
      });
      for (const workflow of toB) {
        expect(workflow.workflowId).toMatch(/^switch\//);
        expect(workflow.status.name).toBe('COMPLETED');
        expect(workflow.typedSearchAttributes.get(searchAttributes.victims)).toEqual(['chat-a']);
        expect(workflow.typedSearchAttributes.get(searchAttributes.host)).toBe(host1.hostId);
      }
      // "Every switch that parked chat-a" is the same switches; host 2's started chat-c only.
      const parkedA = await list(`CapyVictims = 'chat-a'`);
      expect(parkedA.map((w) => w.workflowId).sort()).toEqual(toB.map((w) => w.workflowId).sort());
      const onHost2 = await list(`CapyHost = '${host2.hostId}'`);
      expect(onHost2.map((w) => w.typedSearchAttributes.get(searchAttributes.target))).toEqual(['chat-c']);
    },
  );
});
