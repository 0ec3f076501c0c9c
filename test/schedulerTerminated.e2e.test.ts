/**
 * A host scheduler terminated from the Temporal Web UI (a terminate cannot be refused), as clients
 * see it over real sockets: the real server, a host agent running simulator engines, and the real
 * workflows on Temporal. The simulated card holds one model at a time.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Deployment } from '../store/deployments.js';
import { workflowIds } from '../workflows/definitions.js';
import { simDeployment } from './support/lifecycle.js';
import { type ServerBench, startServerBench } from './support/serverBench.js';
import { until } from './support/until.js';

const REQUEST_DEADLINE_MS = 30_000;

describe('a host scheduler terminated from the Web UI', () => {
  let bench: ServerBench;
  let a: Deployment;
  let slow: Deployment;

  beforeAll(async () => {
    bench = await startServerBench({
      hostYaml: `resource_policy: { queue: { admission_window: 100ms, request_deadline: ${REQUEST_DEADLINE_MS}ms } }`,
    });
    a = await bench.deploy('chat-a');
    slow = await bench.deploy('chat-slow', simDeployment('chat-slow', 'vllm', ['--sim-load-ms', '3000']));
  });
  afterAll(async () => {
    await bench?.close();
  });

  it('loses no waiting request: the next run is told of it with the next report, and serves it', async () => {
    expect((await bench.chat(a)).status).toBe(200);
    // chat-slow's request waits while its switch parks chat-a and starts it (3 s); the run is terminated meanwhile.
    const waiting = bench.chat(slow);
    await until('chat-slow to be starting', () => (bench.stateOf(slow) === 'starting' ? true : undefined));
    await bench.server.client.workflow
      .getHandle(workflowIds.hostScheduler(bench.hostId))
      .terminate('terminated from the Web UI');

    // chat-a's request starts a new run; the server, finding a new run, reports chat-slow's request again.
    const startedAt = Date.now();
    const [other, first] = await Promise.all([bench.chat(a), waiting]);
    expect(other).toMatchObject({ status: 200, body: { model: 'chat-a' } });
    expect(first).toMatchObject({ status: 200, body: { model: 'chat-slow' } });
    // Well before the request deadline: two switches, one of them a 3 s start.
    expect(first.endAtMs - startedAt).toBeLessThan(REQUEST_DEADLINE_MS / 2);
  });
});
