/**
 * The standalone's `GET /management/v1/metrics/load` for SGLang (README "Reading load", spec
 * "Standalone"): it reads its own engine's figures, so an SGLang that reports how many requests its
 * scheduler runs at once (0.5.18 on) shows `max_running` with `source: engine`, as a server with hosts
 * does; an older one shows `engine_default`.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { type CliResult, capyctl } from './support/capyctl.js';
import { simDeployment } from './support/lifecycle.js';
import { type StandaloneProcess, startStandaloneProcess } from './support/standalone.js';
import { until } from './support/until.js';

interface LoadBody {
  deployments: Array<{
    name: string;
    max_running: unknown;
    instances: Array<{ max_running: unknown; sample: { engine: unknown } | null }>;
  }>;
}

describe("the standalone's load of an SGLang", () => {
  let standalone: StandaloneProcess;
  const dir = mkdtempSync(join(tmpdir(), 'capyctl-load-'));
  const file = (name: string, text: string) => {
    const path = join(dir, name);
    writeFileSync(path, text);
    return path;
  };
  const cli = (...args: string[]) =>
    capyctl(args, { CAPYCTL_SERVER: standalone.managementUrl, CAPYCTL_ADMIN_TOKEN: '' }, dir);
  const ok = (r: CliResult) => expect(r, r.stderr).toMatchObject({ code: 0 });

  /** The deployment's entry once its instance carries a sample, as the README's curl prints it. */
  const loadOf = (name: string) =>
    until(`${name}'s instance to carry a sample`, async () => {
      const reply = await request(`${standalone.managementUrl}/management/v1/metrics/load?deployment=${name}`, {
        headers: { authorization: `Bearer ${standalone.adminToken}` },
      });
      const body = (await reply.body.json()) as LoadBody;
      const deployment = body.deployments[0];
      return deployment?.instances[0]?.sample ? deployment : undefined;
    });

  beforeAll(async () => {
    standalone = await startStandaloneProcess({
      dir,
      temporalAddress: inject('temporalAddress'),
      // Two 5 GiB models side by side on one card, so neither start parks the other.
      file: file('standalone.yaml', 'examples: false\nhost:\n  host_ram: 64GiB\n  gpus: [{ memory: 16GiB }]\n'),
    });
  }, 120_000);

  afterAll(async () => {
    expect(await standalone?.stop()).toBe(0);
  });

  it("shows SGLang's own figure from 0.5.18 with source engine, and engine_default before", async () => {
    ok(
      await cli(
        'deploy',
        'model',
        '--file',
        file('new.yaml', simDeployment('sg-new', 'sglang', ['--sim-version', '0.5.18'])),
      ),
    );
    ok(await cli('deploy', 'model', '--file', file('old.yaml', simDeployment('sg-old', 'sglang'))));
    for (const name of ['sg-new', 'sg-old']) ok(await cli('start', 'deployment', name, '--wait'));

    const reporting = await loadOf('sg-new');
    expect(reporting.instances[0]!.max_running).toEqual({ count: 256, source: 'engine' });
    expect(reporting.max_running).toEqual({ count: 256, source: 'engine' });
    expect((await loadOf('sg-old')).instances[0]!.max_running).toEqual({ source: 'engine_default' });
  }, 120_000);
});
