/**
 * Prometheus metrics, scraped as Prometheus does, from a server and a host agent run as processes:
 * after a start, a switch that parks and starts, and a switch back that wakes, the switches' phases
 * are in the histograms, the switches counted by outcome and the requests by deployment and
 * outcome, each request refused before it was routed by its status code and error, an engine's
 * crash by its signal, each deployment's state, a host found down, and which capyctl runs. No series
 * has an empty label value or a label Prometheus sets itself. The management listener's `/metrics`
 * takes the admin token or the metrics token, and the metrics token reads nothing else; a host's
 * ingress takes the metrics token the server handed it.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiErrors, renderApiError } from '../domain/catalogue.js';
import { INFERENCE_BODY_LIMIT_BYTES } from '../gateway/inferenceApp.js';
import { instanceStates } from '../domain/vocabulary.js';
import { gpuUsage } from '../hostAgent/simulatedGpu.js';
import { Cluster, CLUSTER_ADMIN_TOKEN, type ClusterHost } from './support/cluster.js';
import { simDeployment } from './support/lifecycle.js';
import { postDeclaringLength } from './support/declaredLength.js';
import { type Scrape, samplesOf, scrape, valueOf } from './support/prometheusText.js';
import { getWithRepeatedHeader } from './support/repeatedHeaders.js';
import { until } from './support/until.js';

const METRICS_TOKEN = 'capy_metrics_cluster_test';
const INFERENCE_TOKEN = 'capy_inference_cluster_test';

describe('Prometheus metrics', () => {
  let cluster: Cluster;
  let host: ClusterHost;
  let serverMetrics: string;

  beforeAll(async () => {
    cluster = await Cluster.start({
      serverYaml: `metrics: { token: "${METRICS_TOKEN}" }\nhosts: { down_after: 3s }`,
      inferenceToken: INFERENCE_TOKEN,
      hosts: [{}],
    });
    host = cluster.hosts[0]!;
    serverMetrics = `${cluster.managementUrl}/metrics`;
    await Promise.all([
      cluster.deploy(simDeployment('chat-a')),
      cluster.deploy(simDeployment('chat-b')),
      cluster.deploy(simDeployment('held', 'vllm', [], 'lifecycle: { activation: explicit }')),
    ]);
    // One 8 GiB card holds one model: chat-a starts, chat-b parks it and starts, chat-a wakes.
    for (const model of ['chat-a', 'chat-b', 'chat-a']) expect((await cluster.chat(model)).status, model).toBe(200);
    // An explicit model nobody started is refused, not started.
    expect((await cluster.chat('held')).status).toBe(409);
  }, 120_000);

  afterAll(async () => {
    await cluster?.close();
  }, 60_000);

  it('the management listener’s /metrics takes the admin token or the metrics token, which reads nothing else', async () => {
    const refused = renderApiError(apiErrors.unauthorized('admin token or metrics token')).body;
    expect(await cluster.api('GET', '/metrics', undefined, null)).toMatchObject({ status: 401, body: refused });
    expect(await cluster.api('GET', '/metrics', undefined, 'capy_metrics_guessed_token')).toMatchObject({
      status: 401,
      body: refused,
    });
    expect((await scrape(serverMetrics, CLUSTER_ADMIN_TOKEN)).status).toBe(200);
    expect((await scrape(serverMetrics, METRICS_TOKEN)).status).toBe(200);
    expect(await cluster.api('GET', '/management/v1/deployments', undefined, METRICS_TOKEN)).toMatchObject({
      status: 401,
      body: renderApiError(apiErrors.unauthorized('admin token')).body,
    });
  });

  it('counts the switches by outcome, times each phase, and counts the requests by deployment and outcome', async () => {
    // The last receipt is written after the waiters were released: it may follow the answer.
    const families = await until('the three switches to be counted', async () => {
      const families = await scrape(serverMetrics, METRICS_TOKEN);
      return (valueOf(families, 'capyctl_switches_total', { outcome: 'released' }) ?? 0) >= 3 ? families : undefined;
    });
    expect(families.types.get('capyctl_switch_phase_seconds')).toBe('HISTOGRAM');
    expect(families.types.get('capyctl_switches_total')).toBe('COUNTER');
    const phase = (name: string, parkTier = 'none') =>
      valueOf(families, 'capyctl_switch_phase_seconds', { phase: name, park_tier: parkTier }) ?? 0;
    const parkTiers = samplesOf(families, 'capyctl_switch_phase_seconds_count', { phase: 'park' }).map(
      (s) => s.labels?.park_tier,
    );
    expect(parkTiers).toHaveLength(1);
    const tier = parkTiers[0]!;
    expect(tier).toMatch(/^(host_ram|deep|kv_only)$/);
    expect({
      window: phase('window'),
      drain: phase('drain'),
      park: phase('park', tier),
      start: phase('start'),
      wake: phase('wake', tier),
      check: phase('check', tier),
      release: phase('release'),
    }).toEqual({ window: 2, drain: 2, park: 2, start: 2, wake: 1, check: 1, release: 3 });

    // The whole switch, by outcome: each at least as long as its own steps.
    expect(families.types.get('capyctl_switch_duration_seconds')).toBe('HISTOGRAM');
    expect(valueOf(families, 'capyctl_switch_duration_seconds', { outcome: 'released' })).toBe(3);
    const switchesSum = samplesOf(families, 'capyctl_switch_duration_seconds_sum', { outcome: 'released' });
    const phasesSum = samplesOf(families, 'capyctl_switch_phase_seconds_sum').reduce((t, s) => t + Number(s.value), 0);
    expect(Number(switchesSum[0]?.value)).toBeGreaterThanOrEqual(phasesSum);

    expect(valueOf(families, 'capyctl_requests_total', { deployment: 'chat-a', code: '200', error: 'none' })).toBe(2);
    expect(valueOf(families, 'capyctl_requests_total', { deployment: 'chat-b', code: '200', error: 'none' })).toBe(1);
    expect(
      valueOf(families, 'capyctl_requests_total', { deployment: 'held', code: '409', error: 'deployment_inactive' }),
    ).toBe(1);
    expect(valueOf(families, 'capyctl_request_wait_seconds', { deployment: 'chat-a' })).toBe(2);
    expect(valueOf(families, 'capyctl_request_time_to_first_byte_seconds', { deployment: 'chat-b' })).toBe(1);
    // chat-b's one request waited through a park and a start, and its first byte came after that wait.
    const sumOf = (name: string) => Number(samplesOf(families, `${name}_sum`, { deployment: 'chat-b' })[0]?.value);
    const waitedB = sumOf('capyctl_request_wait_seconds');
    expect(waitedB).toBeGreaterThan(0.1);
    expect(sumOf('capyctl_request_time_to_first_byte_seconds')).toBeGreaterThanOrEqual(waitedB);
    expect(valueOf(families, 'capyctl_queue_requests_waiting', { deployment: 'chat-b' })).toBe(0);
    expect(valueOf(families, 'capyctl_queue_requests_in_flight', { deployment: 'chat-a' })).toBe(0);
    expect(
      valueOf(families, 'capyctl_gpu_memory_bytes', { host: host.hostId, gpu: '0', state: 'ready' }),
    ).toBeGreaterThan(0);
    await expectEngineSample(serverMetrics, { host: host.hostId, deployment: 'chat-a', instance_index: '0' });
    expectEveryLabelSaid(families);
  });

  it('a host’s ingress serves its own metrics to the metrics token: its engines’ samples and its GPU memory by state', async () => {
    const hostMetrics = `${await cluster.ingressUrl(host)}/metrics`;
    // The host never holds the admin token.
    for (const token of [null, CLUSTER_ADMIN_TOKEN])
      expect((await scrape(hostMetrics, token)).status, `with ${token}`).toBe(401);
    // Two Authorization headers are refused, as the server's listeners refuse them.
    const twice = [`Bearer ${METRICS_TOKEN}`, 'Bearer other'];
    expect(await getWithRepeatedHeader(hostMetrics, 'authorization', twice)).toEqual({
      status: 400,
      body: renderApiError(apiErrors.repeatedHeader('Authorization')).body,
    });
    const families = await expectEngineSample(hostMetrics, {
      host: host.hostId,
      deployment: 'chat-a',
      instance_index: '0',
    });
    expect(
      valueOf(families, 'capyctl_gpu_memory_bytes', { host: host.hostId, gpu: '0', state: 'ready' }),
    ).toBeGreaterThan(0);
    expect(valueOf(families, 'capyctl_build_info', thisBuild())).toBe(1);
    expectEveryLabelSaid(families);
  });

  it('counts each request refused before it was routed, under (unrouted), by status code and error', async () => {
    const refused = [
      ['a model no deployment serves', await cluster.chat('no-such-model'), 404],
      ['a body that is not JSON', await inference('{"model": "chat-a",'), 400],
      ['a body without a model', await inference(JSON.stringify({ messages: [] })), 400],
      ['a body over the limit', await oversizedInference(), 413],
      ['no inference token', await inference(JSON.stringify({ model: 'chat-a' }), null), 401],
    ] as const;
    for (const [what, reply, status] of refused) expect(reply.status, what).toBe(status);
    const families = await scrape(serverMetrics, METRICS_TOKEN);
    const unrouted = (code: string, error: string) =>
      valueOf(families, 'capyctl_requests_total', { deployment: '(unrouted)', code, error });
    expect({
      not_found: unrouted('404', 'not_found'),
      invalid_request: unrouted('400', 'invalid_request'),
      payload_too_large: unrouted('413', 'payload_too_large'),
      unauthorized: unrouted('401', 'unauthorized'),
    }).toEqual({ not_found: 1, invalid_request: 2, payload_too_large: 1, unauthorized: 1 });
    // The model the client named is its own text: no series carries it.
    expect(samplesOf(families, 'capyctl_requests_total', { deployment: 'no-such-model' })).toEqual([]);
    expectEveryLabelSaid(families);
  });

  it('says which capyctl the server runs, and each deployment’s state, one series per state', async () => {
    const families = await scrape(serverMetrics, METRICS_TOKEN);
    expect(families.types.get('capyctl_build_info')).toBe('GAUGE');
    expect(valueOf(families, 'capyctl_build_info', thisBuild())).toBe(1);
    expect(stateOf(families, 'chat-a')).toEqual({ state: 'ready', series: instanceStates.options.length });
    expect(stateOf(families, 'chat-b')).toEqual({ state: 'parked', series: instanceStates.options.length });
    expect(stateOf(families, 'held')).toEqual({ state: 'stopped', series: instanceStates.options.length });
  });

  it('counts an engine that crashed by its host, deployment and signal, and shows its deployment stopped', async () => {
    const { owners } = await gpuUsage(join(host.dataDir, 'sim-gpus'), 0);
    const engine = owners.find((o) => o.label.endsWith('sim/chat-a'));
    expect(engine, JSON.stringify(owners)).toBeDefined();
    process.kill(engine!.pid, 'SIGKILL');
    const exit = { host: host.hostId, deployment: 'chat-a', exit_code: 'none', signal: 'SIGKILL' };
    const families = await until('the exit to be counted', async () => {
      const families = await scrape(serverMetrics, METRICS_TOKEN);
      return valueOf(families, 'capyctl_engine_exits_total', exit) === 1 ? families : undefined;
    });
    expect(families.types.get('capyctl_engine_exits_total')).toBe('COUNTER');
    expect(stateOf(families, 'chat-a').state).toBe('stopped');
    expectEveryLabelSaid(families);
  });

  it('shows a host up while it reports, and down once it stopped reporting', async () => {
    const up = async () =>
      valueOf(await scrape(serverMetrics, METRICS_TOKEN), 'capyctl_host_up', { host: host.hostId });
    expect(await up()).toBe(1);
    await host.process.stop('SIGKILL');
    await until('the host to be found down', async () => ((await up()) === 0 ? true : undefined));
  });

  /** A request to the inference listener with `body` as it is, with the inference token unless `token` is null. */
  async function inference(body: string | Buffer, token: string | null = INFERENCE_TOKEN) {
    const reply = await request(`${cluster.inferenceUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(token === null ? {} : { authorization: `Bearer ${token}` }) },
      body,
    });
    await reply.body.dump();
    return { status: reply.statusCode };
  }

  /** A request to the inference listener whose body is declared one byte over the limit. */
  function oversizedInference() {
    return postDeclaringLength(
      `${cluster.inferenceUrl}/v1/chat/completions`,
      { 'content-type': 'application/json', authorization: `Bearer ${INFERENCE_TOKEN}` },
      INFERENCE_BODY_LIMIT_BYTES + 1,
    );
  }
});

/** The labels `capyctl_build_info` must carry: this checkout's version and commit, and this Node.js. */
function thisBuild(): Record<string, string> {
  const root = join(import.meta.dirname, '..');
  return {
    version: (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string }).version,
    commit: execFileSync('git', ['-C', root, 'rev-parse', 'HEAD'], { encoding: 'utf8' }).trim(),
    node_version: process.versions.node,
  };
}

/** The deployment's state as `capyctl_deployment_state` says (the one series at 1), and how many series it has. */
function stateOf(families: Scrape, deployment: string): { state: string | undefined; series: number } {
  const series = samplesOf(families, 'capyctl_deployment_state', { deployment });
  return { state: series.find((s) => s.value === '1')?.labels?.state, series: series.length };
}

/**
 * No series has a label with an empty value (Prometheus reads it as no label: a selector naming it
 * misses the series) nor a label Prometheus sets itself on every scraped series (`instance`, `job`:
 * the scrape would rename ours `exported_instance`).
 */
function expectEveryLabelSaid(families: Scrape): void {
  const unsaid = [...families.series].flatMap(([name, samples]) =>
    samples.flatMap((s) =>
      Object.entries(s.labels ?? {})
        .filter(([label, value]) => value === '' || label === 'instance' || label === 'job')
        .map(([label, value]) => `${name}{${label}="${value}"}`),
    ),
  );
  expect(unsaid).toEqual([]);
}

/** Waits for the engine's sample (the host samples every second) on the scrape; the families. */
function expectEngineSample(url: string, labels: Record<string, string>): Promise<Scrape> {
  return until(`${labels.deployment}'s engine sample on ${url}`, async () => {
    const families = await scrape(url, METRICS_TOKEN);
    expect(families.status).toBe(200);
    const running = valueOf(families, 'capyctl_engine_requests_running', labels);
    const kv = valueOf(families, 'capyctl_engine_kv_cache_usage_ratio', labels);
    return running === 0 &&
      valueOf(families, 'capyctl_engine_requests_waiting', labels) === 0 &&
      kv !== undefined &&
      kv >= 0 &&
      kv <= 1
      ? families
      : undefined;
  });
}
