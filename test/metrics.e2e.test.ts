/**
 * Prometheus metrics, scraped as Prometheus does, from a server and a host agent run as processes:
 * after a start, a switch that parks and starts, and a switch back that wakes, the switches' phases
 * are in the histograms, the switches counted by outcome and the requests by deployment and
 * outcome. The management listener's `/metrics` takes the admin token or the metrics token, and the
 * metrics token reads nothing else; a host's ingress takes the metrics token the server handed it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiErrors, renderApiError } from '../domain/catalogue.js';
import { Cluster, CLUSTER_ADMIN_TOKEN, type ClusterHost } from './support/cluster.js';
import { simDeployment } from './support/lifecycle.js';
import { type Scrape, samplesOf, scrape, valueOf } from './support/prometheusText.js';
import { getWithRepeatedHeader } from './support/repeatedHeaders.js';
import { until } from './support/until.js';

const METRICS_TOKEN = 'capy_metrics_cluster_test';

describe('Prometheus metrics', () => {
  let cluster: Cluster;
  let host: ClusterHost;
  let serverMetrics: string;

  beforeAll(async () => {
    cluster = await Cluster.start({ serverYaml: `metrics: { token: "${METRICS_TOKEN}" }`, hosts: [{}] });
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
    const phase = (name: string, parkTier = '') =>
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

    expect(valueOf(families, 'capyctl_requests_total', { deployment: 'chat-a', status: '200', code: '' })).toBe(2);
    expect(valueOf(families, 'capyctl_requests_total', { deployment: 'chat-b', status: '200', code: '' })).toBe(1);
    expect(
      valueOf(families, 'capyctl_requests_total', { deployment: 'held', status: '409', code: 'deployment_inactive' }),
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
    await expectEngineSample(serverMetrics, { host: host.hostId, deployment: 'chat-a', instance: '0' });
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
    const families = await expectEngineSample(hostMetrics, { host: host.hostId, deployment: 'chat-a', instance: '0' });
    expect(
      valueOf(families, 'capyctl_gpu_memory_bytes', { host: host.hostId, gpu: '0', state: 'ready' }),
    ).toBeGreaterThan(0);
  });
});

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
