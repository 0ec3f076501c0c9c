/**
 * The operator's start over real processes (a server and a host agent, one card that holds one
 * model): it answers as its switch begins, naming it, so nothing it does goes unseen by a caller
 * that stops listening; `--wait` follows the switch to the end and prints the receipt as before;
 * and a start whose memory is held is refused by the API rather than left to act later, while the
 * command waits for the memory where its operator sees it.
 */
import { execFile } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { apiErrors, hostStepFailures } from '../domain/catalogue.js';
import { freePort } from '../processes/freePort.js';
import { CAPYCTL } from './support/capyctl.js';
import { Cluster, CLUSTER_ADMIN_TOKEN } from './support/cluster.js';
import { simDeployment } from './support/lifecycle.js';
import { until } from './support/until.js';

const UUID = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';
const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
/** Far longer than an answer takes: a start that waited for it could not answer in time. */
const LOAD_MS = 12_000;

describe('start, with a server and a host agent as processes', () => {
  let cluster: Cluster;
  let slow: { deployment_id: string; name: string };
  let quick: { deployment_id: string; name: string };

  beforeAll(async () => {
    cluster = await Cluster.start({ hosts: [{ gpuMemory: '8GiB' }] });
    slow = await cluster.deploy(simDeployment('slow-model', 'vllm', ['--sim-load-ms', String(LOAD_MS)]));
    quick = await cluster.deploy(simDeployment('quick-model'));
  }, 120_000);
  afterAll(async () => {
    await cluster?.close();
  });

  const stateOf = async (name: string) => (await cluster.status(name)).state as string;

  /** `capyctl` on a terminal: its output as the terminal got it, stdout and stderr together. */
  const onTerminal = (args: readonly string[]) =>
    new Promise<{ code: number; output: string }>((resolve) => {
      const env = { ...process.env, CAPYCTL_SERVER: cluster.managementUrl, CAPYCTL_ADMIN_TOKEN: CLUSTER_ADMIN_TOKEN };
      execFile(
        'script',
        ['-qec', [process.execPath, CAPYCTL, ...args].join(' '), '/dev/null'],
        { env },
        (error, output) => {
          resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, output });
        },
      );
    });

  it('answers at once with the switch it began while the model loads; the switch and the model show it until it is ready', async () => {
    const sentAt = Date.now();
    const started = await cluster.api('POST', `/management/v1/deployments/${slow.name}/start`, { evict: false });
    const answeredMs = Date.now() - sentAt;
    expect(started.status).toBe(200);
    expect(started.body).toEqual({
      deployment_id: slow.deployment_id,
      name: slow.name,
      switch_id: expect.stringMatching(new RegExp(`^${UUID}$`)),
      victims: [],
      state: 'starting',
    });
    expect(answeredMs).toBeLessThan(LOAD_MS / 2);

    // Whoever sent it, and whether or not they still listen: the switch it named runs, and the model says so.
    const switchId = started.body.switch_id as string;
    expect(await cluster.api('GET', `/management/v1/switches/${switchId}`)).toMatchObject({
      status: 200,
      body: { switch_id: switchId, outcome: 'running', victims: [] },
    });
    await until(
      'the model to show starting',
      async () => ((await stateOf(slow.name)) === 'starting' ? true : undefined),
      10_000,
    );

    const ended = await until(
      'the switch to end',
      async () => {
        const s = (await cluster.api('GET', `/management/v1/switches/${switchId}`)).body;
        return s.outcome === 'running' ? undefined : s;
      },
      LOAD_MS * 4,
    );
    expect(Date.now() - sentAt).toBeGreaterThanOrEqual(LOAD_MS);
    expect(ended).toEqual({
      switch_id: switchId,
      outcome: 'released',
      target: { deployment_id: slow.deployment_id, name: slow.name, state: 'ready' },
      victims: [],
    });
    expect((await cluster.chat(slow.name)).status).toBe(200);
  }, 120_000);

  it('start --evict --wait follows the switch and prints the receipt as it ended: the victim released, the model ready', async () => {
    const r = await cluster.capyctl(['start', 'deployment', quick.name, '--evict', '--wait']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(
      new RegExp(
        `^quick-model: ready\\nswitch_id: (${UUID}) \\(workflow switch/\\1 in the Temporal Web UI\\)\\nvictim: slow-model \\(deployment ${slow.deployment_id}, instance 0, GPU 0\\) released: parked \\(host RAM\\)\\n$`,
      ),
    );
    expect(r.stderr).toMatch(/^waiting for quick-model to be ready\nwaited \d+\.\ds for quick-model to be ready\n$/);
    expect([await stateOf(quick.name), await stateOf(slow.name)]).toEqual(['ready', 'parked']);
    expect((await cluster.chat(quick.name)).status).toBe(200);
  }, 60_000);

  it('without --wait, names the victims on their way out and says the start goes on', async () => {
    const r = await cluster.capyctl(['start', 'deployment', slow.name, '--evict']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(
      new RegExp(
        `^slow-model: waking\\nswitch_id: ${UUID} \\(.*\\)\\nvictim: quick-model \\(deployment ${quick.deployment_id}, instance 0, GPU 0\\) releasing: parking \\(host RAM\\)\\nthe wake runs in the background; run \`capyctl list deployments\` until it shows ready\\n$`,
      ),
    );
    await until(
      'the model to be ready',
      async () => ((await stateOf(slow.name)) === 'ready' ? true : undefined),
      30_000,
    );
  }, 60_000);

  it('refuses a start whose memory another model holds, and does not start it later when the memory comes free; the command waits for it', async () => {
    const refused = await cluster.api('POST', `/management/v1/deployments/${quick.name}/start`, { evict: false });
    const error = apiErrors.memoryHeld(quick.deployment_id, [slow.name]);
    expect(refused).toMatchObject({ status: 409, body: { code: error.code, message: error.message, retryable: true } });
    expect(await stateOf(slow.name)).toBe('ready');

    // The memory comes free: nothing the refused start asked for acts now.
    expect((await cluster.capyctl(['park', 'deployment', slow.name])).code).toBe(0);
    await until('the model to park', async () => ((await stateOf(slow.name)) === 'parked' ? true : undefined), 30_000);
    await sleep(3_000);
    expect([await stateOf(quick.name), await stateOf(slow.name)]).toEqual(['parked', 'parked']);

    // The command, without --wait, waits for the memory (the spec's "it waits for memory instead"),
    // then answers as the start begins; with --wait it then follows the start to ready.
    expect((await cluster.capyctl(['start', 'deployment', slow.name, '--wait'])).code).toBe(0);
    const plain = cluster.capyctl(['start', 'deployment', quick.name]);
    await sleep(3_000);
    expect([await stateOf(quick.name), await stateOf(slow.name)]).toEqual(['parked', 'ready']);
    expect((await cluster.capyctl(['park', 'deployment', slow.name])).code).toBe(0);
    const started = await plain;
    expect(started.code, started.stderr).toBe(0);
    expect(started.stderr).toMatch(
      new RegExp(
        // The API's refusal names it by its ID; the line, as the operator named it.
        '^waiting for GPU memory for quick-model \\(deployment quick-model needs GPU memory held by slow-model\\)\\nwaited \\d+\\.\\ds for GPU memory',
      ),
    );
    expect(started.stdout).toMatch(new RegExp(`^quick-model: waking\\nswitch_id: ${UUID} \\(.*\\)\\n`));
    await until(
      'quick-model to be ready',
      async () => ((await stateOf(quick.name)) === 'ready' ? true : undefined),
      30_000,
    );

    expect((await cluster.capyctl(['park', 'deployment', quick.name])).code).toBe(0);
    await until(
      'quick-model to park',
      async () => ((await stateOf(quick.name)) === 'parked' ? true : undefined),
      30_000,
    );
    expect((await cluster.capyctl(['start', 'deployment', slow.name, '--wait'])).code).toBe(0);
    const waiting = cluster.capyctl(['start', 'deployment', quick.name, '--wait']);
    await sleep(3_000);
    expect([await stateOf(quick.name), await stateOf(slow.name)]).toEqual(['parked', 'ready']);
    expect((await cluster.capyctl(['park', 'deployment', slow.name])).code).toBe(0);
    const r = await waiting;
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`^quick-model: ready\\nswitch_id: ${UUID} \\(.*\\)\\n$`));
    expect([await stateOf(quick.name), await stateOf(slow.name)]).toEqual(['ready', 'parked']);
  }, 180_000);

  it('preinitialize waits for memory in the command, naming the models that hold it as they change, and parks the model once it is free', async () => {
    const third = await cluster.deploy(simDeployment('third-model'));
    const refused = await cluster.api('POST', `/management/v1/deployments/${third.name}/preinitialize`);
    const error = apiErrors.memoryHeldToPreinitialize(third.deployment_id, [quick.name]);
    expect(refused).toMatchObject({ status: 409, body: { code: error.code, message: error.message, retryable: true } });

    // Two operators: one's stderr a pipe, the other's a terminal (util-linux `script` gives it one).
    const waiting = cluster.capyctl(['preinitialize', 'deployment', third.name]);
    const watched = onTerminal(['preinitialize', 'deployment', third.name]);
    await sleep(2_500);
    // Another model takes the memory: the command says so (not a terminal: a line per change).
    expect((await cluster.capyctl(['start', 'deployment', slow.name, '--evict', '--wait'])).code).toBe(0);
    await sleep(2_500);
    expect(await stateOf(third.name)).toBe('stopped');
    expect((await cluster.capyctl(['park', 'deployment', slow.name])).code).toBe(0);
    const r = await waiting;
    expect(r.code, r.stderr).toBe(0);
    const held = (by: string) => `GPU memory for third-model (deployment third-model needs GPU memory held by ${by})`;
    const lines = r.stderr.trimEnd().split('\n');
    expect(lines[0]).toBe(`waiting for ${held(quick.name)}`);
    expect(lines).toContain(`waiting for ${held(slow.name)}`);
    expect(lines.at(-1)).toMatch(/^waited \d+\.\ds for GPU memory for third-model /);
    expect(r.stdout).toMatch(/^third-model: (parking|parked)\n/);
    // On the terminal, one line rewritten in place, counting the seconds, the holders as they change.
    const t = await watched;
    expect(t.code, t.output).toBe(0);
    expect(t.output).toMatch(new RegExp(`^\\r\\x1b\\[Kwaiting for ${escape(held(quick.name))}… 0\\.\\ds\\r\\x1b\\[K`));
    expect(t.output).toContain(`\r\x1b[Kwaiting for ${held(slow.name)}… `);
    expect(t.output).toMatch(
      /\r\x1b\[Kwaited \d+\.\ds for GPU memory for third-model [^\r]*\r\nthird-model: (parking|parked)\r\n/,
    );
    await until(
      'third-model to park',
      async () => ((await stateOf(third.name)) === 'parked' ? true : undefined),
      30_000,
    );
  }, 120_000);

  // Before a larger card joins (the next test's): 8 GiB is the largest GPU here.
  it('refuses a model no GPU could hold, a request at once and start --evict --wait alike, naming the need and the largest GPU, not a holder', async () => {
    const huge = await cluster.deploy(
      simDeployment('huge-model', 'vllm', ['--sim-weights', '9GiB', '--sim-kv', '1GiB']),
    );
    // Another model holds the card: parking it would still leave 8 GiB, short of 10.
    expect((await cluster.capyctl(['start', 'deployment', quick.name, '--evict', '--wait'])).code).toBe(0);
    const largest = { hostId: cluster.hosts[0]!.hostId, memoryBytes: 8 * 2 ** 30 };
    const error = apiErrors.fitsNoGpu(huge.deployment_id, 10 * 2 ** 30, largest);
    expect(error.message).toBe(
      `deployment ${huge.deployment_id} needs 10 GiB of GPU memory, more than the largest GPU it may run on has ` +
        `(8 GiB on ${cluster.hosts[0]!.hostId})`,
    );

    const sentAt = Date.now();
    const reply = await request(`${cluster.inferenceUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: huge.name, messages: [{ role: 'user', content: 'hello' }], max_tokens: 4 }),
      // Today's main let it wait toward the 30-minute deadline.
      signal: AbortSignal.timeout(10_000),
    });
    const answeredMs = Date.now() - sentAt;
    expect({ status: reply.statusCode, body: await reply.body.json() }).toEqual({
      status: 409,
      body: { code: 'insufficient_capacity', message: error.message, retryable: false },
    });
    expect(answeredMs).toBeLessThan(1_000);

    const started = await Promise.race([
      cluster.capyctl(['start', 'deployment', huge.name, '--evict', '--wait']),
      sleep(15_000).then(() => ({ code: -1, stdout: '', stderr: 'still waiting after 15 s' })),
    ]);
    expect(started.code, started.stderr).toBe(1);
    expect(started.stdout).toBe('');
    // The CLI names the deployment as the operator did; it waited for nothing, and names no holder.
    const named = apiErrors.fitsNoGpu(huge.name, 10 * 2 ** 30, largest);
    expect(started.stderr).toMatch(/^waiting for huge-model to be ready\nwaited \d+\.\ds for huge-model to be ready\n/);
    expect(started.stderr.endsWith(`capyctl: ${named.code}: ${named.message}\n`), started.stderr).toBe(true);
    expect(started.stderr).not.toContain('held by');
    expect([await stateOf(huge.name), await stateOf(quick.name)]).toEqual(['stopped', 'ready']);
  }, 120_000);

  it("launches a host's engines on its engine_ports only; a start with none left fails, naming them", async () => {
    const port = await freePort();
    // A card both models fit on: the second start takes a port, not the first model's memory.
    const host = await cluster.addHost({ gpuMemory: '24GiB', yaml: `engine_ports: { first: ${port}, last: ${port} }` });
    const only = `hosts: [${host.hostId}]`;
    await cluster.deploy(simDeployment('ported-a', 'vllm', [], only));
    await cluster.deploy(simDeployment('ported-b', 'vllm', [], only));

    const a = await cluster.capyctl(['start', 'deployment', 'ported-a', '--wait']);
    expect(a.code, a.stderr).toBe(0);
    // Its engine is the one on that port.
    const models = await request(`http://127.0.0.1:${port}/v1/models`);
    expect(models.statusCode).toBe(200);
    expect(((await models.body.json()) as { data: Array<{ id: string }> }).data.map((m) => m.id)).toEqual(['ported-a']);

    const b = await cluster.capyctl(['start', 'deployment', 'ported-b', '--wait']);
    const error = apiErrors.startFailed('ported-b', hostStepFailures.enginePortsExhausted(port, port, 1));
    expect(b).toMatchObject({ code: 1, stdout: '' });
    expect(b.stderr.endsWith(`capyctl: ${error.code}: ${error.message}\n`), b.stderr).toBe(true);
    expect([await stateOf('ported-a'), await stateOf('ported-b')]).toEqual(['ready', 'stopped']);
  }, 120_000);
});
