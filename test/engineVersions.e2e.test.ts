/**
 * Engine versions (issue 38, items 3 and 5), over real processes: a server, host agents and the
 * simulator playing each engine's version (`--sim-version`, in a deployment's extra_args, which come
 * last on its command line). A start reads the engine's version once it answers its health route and
 * refuses one capyctl does not know, naming it and the versions it knows, unless the host runs it as
 * a listed one; no engine is let sleep on its own; SGLang's bound is its schedulers' own from 0.5.18,
 * and before it what capyctl passed, or `engine_default`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiErrors, engineSettingRefusals, hostStepFailures } from '../domain/catalogue.js';
import { Cluster, type ClusterHost, gpuUsed } from './support/cluster.js';
import { simDeployment } from './support/lifecycle.js';
import { until } from './support/until.js';

const UNLISTED = '0.33.0';
/** What a start of an unlisted vLLM is refused with, as the host words it. */
const unlistedVllm = hostStepFailures.engineVersionUnsupported(
  'vLLM',
  UNLISTED,
  'GET /version',
  '0.10.1 up to (not including) 0.32.0',
  'engines.vllm.unlisted_version_as',
);

describe('engine versions at start', () => {
  let cluster: Cluster;
  let strict: ClusterHost;
  let lenient: ClusterHost;

  beforeAll(async () => {
    cluster = await Cluster.start({
      hosts: [{ gpuMemory: '16GiB' }, { gpuMemory: '8GiB', engines: { vllm: { unlistedVersionAs: '0.17.0' } } }],
    });
    [strict, lenient] = cluster.hosts as [ClusterHost, ClusterHost];
  }, 120_000);

  afterAll(async () => {
    await cluster?.close();
  });

  it('refuses a vLLM of a version it does not know, naming it and the versions it knows, in the receipt and the status', async () => {
    const { deployment_id: id } = await cluster.deploy(
      simDeployment('unlisted', 'vllm', ['--sim-version', UNLISTED], `hosts: [${strict.hostId}]`),
    );
    const r = await cluster.capyctl(['start', 'deployment', 'unlisted', '--wait']);
    const said = apiErrors.engineVersionUnsupported('unlisted', unlistedVllm);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr.endsWith(`capyctl: engine_version_unsupported: ${said.message}\n`), r.stderr).toBe(true);
    const status = await cluster.status('unlisted');
    expect(status).toMatchObject({
      state: 'stopped',
      start_failure: apiErrors.engineVersionUnsupported(id, unlistedVllm).message,
    });
    // Nothing stays on the card: the engine the check refused was stopped.
    await until('the refused engine to leave the card', async () => ((await gpuUsed(strict)) === 0 ? true : undefined));
    const request = await cluster.chat('unlisted');
    expect(request.body).toMatchObject({ code: 'engine_version_unsupported', retryable: false });
    await until('the engine a request started and the check refused to leave the card', async () =>
      (await gpuUsed(strict)) === 0 ? true : undefined,
    );
  }, 120_000);

  it('runs that version on a host that names the listed one whose requests it takes: it starts, parks and wakes', async () => {
    await cluster.deploy(simDeployment('run-as', 'vllm', ['--sim-version', UNLISTED], `hosts: [${lenient.hostId}]`));
    const r = await cluster.capyctl(['start', 'deployment', 'run-as', '--wait']);
    expect(r.code, r.stderr).toBe(0);
    expect(await cluster.capyctl(['park', 'deployment', 'run-as'])).toMatchObject({ code: 0 });
    await until('run-as to be parked', async () =>
      (await cluster.status('run-as')).state === 'parked' ? true : undefined,
    );
    expect((await cluster.chat('run-as')).status).toBe(200);
    expect(lenient.process.output()).toContain(`"treatedAs":"0.17.0"`);
  }, 120_000);

  it('refuses at deploy a deployment whose extra_args let vLLM sleep on its own', async () => {
    const reply = await cluster.api('POST', '/management/v1/deployments', {
      name: 'self-sleeper',
      engine: 'vllm',
      model: 'sim/self-sleeper',
      extra_args: ['--sleep-idle-ttl', '300'],
    });
    const error = apiErrors.invalidRequest(
      engineSettingRefusals.selfParkOption('deployment self-sleeper: its extra_args', '--sleep-idle-ttl', 'vLLM'),
    );
    expect(reply).toMatchObject({ status: 400, body: { code: error.code, message: error.message, retryable: false } });
  });

  it('refuses to start a host agent whose vLLM command lets it sleep on its own, in one line', async () => {
    const host = await cluster.startHost({ engines: { vllm: { args: ['--sleep-idle-ttl=60'] } } });
    expect(await host.process.exited).toBe(1);
    expect(host.process.output()).toContain(
      `capyctl: ${engineSettingRefusals.selfParkOption('engines.vllm.command', '--sleep-idle-ttl', 'vLLM')}\n`,
    );
  });

  it("SGLang's bound is its schedulers' own from 0.5.18 (engine); before, the one capyctl passed, or engine_default", async () => {
    const declared = await cluster.deploy(
      simDeployment('sg-declared', 'sglang', [], `hosts: [${strict.hostId}]\nmax_concurrent_requests: 8`),
    );
    const chosen = await cluster.deploy(simDeployment('sg-chosen', 'sglang', [], `hosts: [${strict.hostId}]`));
    const reports = await cluster.deploy(
      simDeployment('sg-reports', 'sglang', ['--sim-version', '0.5.18'], `hosts: [${strict.hostId}]`),
    );
    for (const name of ['sg-declared', 'sg-chosen', 'sg-reports'])
      expect(await cluster.capyctl(['start', 'deployment', name, '--wait'])).toMatchObject({ code: 0 });
    const bound = async (id: string) => {
      const load = await cluster.api('GET', `/management/v1/metrics/load?deployment=${id}`);
      return load.body.deployments[0].instances[0]?.max_running;
    };
    // Until a host reports an instance, the server says its host sizes it (on_host).
    const reported = async (id: string) => {
      const figure = await bound(id);
      return figure && figure.source !== 'on_host' ? figure : undefined;
    };
    const ids = [declared, chosen, reports].map((d) => d.deployment_id);
    await until('the host to report the three instances', async () =>
      (await Promise.all(ids.map(reported))).every(Boolean) ? true : undefined,
    );
    expect(await bound(declared.deployment_id)).toEqual({ count: 8, source: 'declared' });
    expect(await bound(chosen.deployment_id)).toEqual({ source: 'engine_default' });
    expect(await bound(reports.deployment_id)).toEqual({ count: 256, source: 'engine' });
  }, 120_000);
});
