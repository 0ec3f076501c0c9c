/**
 * The operator's `capyctl`, run as a child process against `capyctl start standalone` (another
 * child process) on a simulated card that holds one model at a time: the spec's "Park and wake" and
 * "Switch between models" sequences, as the tables, receipts, JSON, exit codes and refusal lines a
 * person sees. Every command finds the admin token where the standalone wrote it.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { apiErrors } from '../domain/catalogue.js';
import { type CliResult, capyctl } from './support/capyctl.js';
import { simDeployment } from './support/lifecycle.js';
import { type StandaloneProcess, startStandaloneProcess } from './support/standalone.js';
import { until } from './support/until.js';

const ULID = '[0-9A-HJKMNP-TV-Z]{26}';
const UUID = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';

describe('capyctl over the management API', () => {
  let standalone: StandaloneProcess;
  let temporal: Client;
  let host: string;
  /** The standalone's working folder: its admin token is in `.data/admin-token` there. */
  const dir = mkdtempSync(join(tmpdir(), 'capyctl-cli-'));

  const env = () => ({ CAPYCTL_SERVER: standalone.managementUrl, CAPYCTL_ADMIN_TOKEN: '' });
  const cli = (...args: string[]) => capyctl(args, env(), dir);
  const file = (name: string, text: string) => {
    const path = join(dir, name);
    writeFileSync(path, text);
    return path;
  };
  const ok = (r: CliResult) => {
    expect(r.code, r.stderr).toBe(0);
    return r.stdout;
  };
  /** Refused by the API: exit 1 and one line naming its code and message. */
  const refused = (r: CliResult, error: { code: string; message: string }) => {
    expect(r).toMatchObject({ code: 1, stdout: '', stderr: `capyctl: ${error.code}: ${error.message}\n` });
  };
  /** The same, after `--wait` printed what it waited for. */
  const refusedAfterWaiting = (r: CliResult, error: { code: string; message: string }) => {
    expect(r).toMatchObject({ code: 1, stdout: '' });
    expect(r.stderr.split('\n').slice(-2)).toEqual([`capyctl: ${error.code}: ${error.message}`, '']);
  };
  const list = async () => ok(await cli('list', 'deployments'));
  /** `capyctl list deployments`, run again until it shows `expected`. */
  const listUntil = (expected: string) =>
    until(`the list to show\n${expected}`, async () => ((await list()) === expected ? true : undefined), 30_000);
  const idOf = async (name: string) =>
    (JSON.parse(ok(await cli('status', 'deployment', name, '--json'))) as { deployment_id: string }).deployment_id;

  /** A request for `model`, as a client sends it (spec, "Make a request"). */
  async function ask(model: string) {
    const reply = await request(`${standalone.inferenceUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hello' }], max_tokens: 4 }),
    });
    return { status: reply.statusCode, body: (await reply.body.json()) as Record<string, unknown> };
  }

  beforeAll(async () => {
    standalone = await startStandaloneProcess({
      dir,
      temporalAddress: inject('temporalAddress'),
      hostId: `gpu-box-${randomUUID().slice(0, 8)}`,
      // One 5 GiB model at a time (the embedded 8 GiB card); parked copies go to host RAM. The file
      // says nothing of host.engines or host.gpus: the embedded defaults' simulator and card stay.
      file: file(
        'standalone.yaml',
        'examples: false\nhost:\n  host_ram: 64GiB\n  resource_policy: { queue: { admission_window: 100ms } }\n',
      ),
    });
    host = standalone.hostId;
    temporal = new Client({ connection: await Connection.connect({ address: inject('temporalAddress') }) });
  }, 120_000);

  afterAll(async () => {
    await temporal?.connection.close();
    expect(await standalone?.stop()).toBe(0);
  });

  it('refuses a document with every problem named by its field and reason, exit 2', async () => {
    const bad = file('bad.yaml', 'name: bad-model\nengine: llama\nmodel: x\nresidency: sometimes\ncolour: red\n');
    const r = await cli('deploy', 'model', '--file', bad);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    const lines = r.stderr.split('\n');
    expect(lines[0]).toBe(`invalid deployment settings in ${bad}:`);
    expect(lines.filter((l) => l.startsWith('  - ')).map((l) => l.split(':')[0])).toEqual([
      '  - engine',
      '  - residency',
      '  - colour',
    ]);
  });

  it('deploys a model; a start before its checkpoint is measured is refused and names --wait', async () => {
    const r = await cli(
      'deploy',
      'model',
      '--file',
      file('my-model.yaml', simDeployment('my-model', 'vllm', ['--sim-park-ms', '3000'])),
    );
    expect(r).toMatchObject({ code: 0, stderr: '' });
    expect(r.stdout).toMatch(
      new RegExp(`^my-model: created, revision 1 \\(deployment ${ULID}\\); its checkpoint is being measured\\n$`),
    );

    // Only a host that has not registered yet may run it: its checkpoint waits for that host.
    ok(
      await cli(
        'deploy',
        'model',
        '--file',
        file('later.yaml', simDeployment('later-model', 'vllm', [], 'hosts: [gpu-later]')),
      ),
    );
    refused(await cli('start', 'deployment', 'later-model'), apiErrors.checkpointUnmeasured('later-model', null));
    expect(ok(await cli('delete', 'deployment', 'later-model'))).toBe('later-model: deleted\n');
  });

  it('starts with --wait, saying what it waits for, and lists it ready', async () => {
    const r = await cli('start', 'deployment', 'my-model', '--wait');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(
      new RegExp(`^my-model: ready\\nswitch_id: (${UUID}) \\(workflow switch/\\1 in the Temporal Web UI\\)\\n$`),
    );
    // Not a terminal: plain lines, the last saying how long.
    expect(r.stderr).toMatch(/(^|\n)waiting for my-model to be ready\nwaited \d+\.\ds for my-model to be ready\n$/);
    expect(await list()).toBe(
      ['NAME       STATE   READY   REVISION   HOSTS', `my-model   ready   1/1     1          ${host}`, ''].join('\n'),
    );
  });

  it('parks in the background: parking, then parked; a request wakes it (spec, "Park and wake")', async () => {
    const r = await cli('park', 'deployment', 'my-model');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(
      new RegExp(
        `^my-model: parking\\nswitch_id: (${UUID}) \\(workflow switch/\\1 in the Temporal Web UI\\)\\nparking runs in the background; run \`capyctl list deployments\` until it shows parked\\n$`,
      ),
    );
    // The park takes 3 s on this engine: the list shows it parking first.
    await listUntil(
      ['NAME       STATE     READY   REVISION   HOSTS', `my-model   parking   0/1     1          ${host}`, ''].join(
        '\n',
      ),
    );
    await listUntil(
      ['NAME       STATE    READY   REVISION   HOSTS', `my-model   parked   0/1     1          ${host}`, ''].join('\n'),
    );

    expect((await ask('my-model')).status).toBe(200);
    expect(await list()).toBe(
      ['NAME       STATE   READY   REVISION   HOSTS', `my-model   ready   1/1     1          ${host}`, ''].join('\n'),
    );
  });

  it('switches with start --evict --wait: the receipt names the victim and the switch (spec, "Switch between models")', async () => {
    ok(await cli('deploy', 'model', '--file', file('other-model.yaml', simDeployment('other-model'))));
    const r = await cli('start', 'deployment', 'other-model', '--evict', '--wait');
    expect(r.code).toBe(0);
    const myId = await idOf('my-model');
    const match = new RegExp(
      `^other-model: ready\\nswitch_id: (${UUID}) \\(workflow switch/\\1 in the Temporal Web UI\\)\\nvictim: my-model \\(deployment ${myId}, instance 0, GPU 0\\) released: parked \\(host RAM\\)\\n$`,
    ).exec(r.stdout);
    expect(match).not.toBeNull();
    // The switch is there to open in the Web UI, finished.
    const described = await temporal.workflow.getHandle(`switch/${match![1]}`).describe();
    expect(described.status.name).toBe('COMPLETED');
    // Where the parked one is: its status says host RAM, as the victim's line did.
    expect(
      ok(await cli('status', 'deployment', 'my-model'))
        .split('\n')
        .slice(-3),
    ).toEqual([
      expect.stringMatching(/^INSTANCE +HOST +GENERATION +STATE +PARKED IN$/),
      expect.stringMatching(new RegExp(`^0 +${host} +1 +parked +host RAM$`)),
      '',
    ]);
    expect(JSON.parse(ok(await cli('status', 'deployment', 'my-model', '--json'))).instances).toEqual([
      {
        index: 0,
        host_id: host,
        generation: 1,
        state: 'parked',
        park_tier: 'host_ram',
        // Its engine keeps nothing asleep, as its host measured after the park.
        parked_residue_bytes: 0,
        parked_residue_from: 'measured',
      },
    ]);

    expect(await list()).toBe(
      [
        'NAME          STATE    READY   REVISION   HOSTS',
        `my-model      parked   0/1     1          ${host}`,
        `other-model   ready    1/1     1          ${host}`,
        '',
      ].join('\n'),
    );

    // A request switches the same way.
    expect((await ask('my-model')).status).toBe(200);
    expect(await list()).toBe(
      [
        'NAME          STATE    READY   REVISION   HOSTS',
        `my-model      ready    1/1     1          ${host}`,
        `other-model   parked   0/1     1          ${host}`,
        '',
      ].join('\n'),
    );
  });

  it('prints the same facts as JSON for scripts', async () => {
    const status = JSON.parse(ok(await cli('status', 'deployment', 'my-model', '--json')));
    expect(status).toMatchObject({
      deployment_id: expect.stringMatching(new RegExp(`^${ULID}$`)),
      name: 'my-model',
      revision: 1,
      state: 'ready',
      ready_instances: 1,
      desired_instances: 1,
      hosts: [host],
      activation: 'on_demand',
      checkpoint: 'measured',
      instances: [{ index: 0, host_id: host, generation: 1, state: 'ready' }],
    });
    const listed = JSON.parse(ok(await cli('list', 'deployments', '--json'))) as Array<{ name: string; state: string }>;
    expect(listed.map((d) => [d.name, d.state])).toEqual([
      ['my-model', 'ready'],
      ['other-model', 'parked'],
    ]);
    const hosts = JSON.parse(ok(await cli('list', 'hosts', '--json')));
    expect(hosts).toMatchObject([
      {
        host_id: host,
        gpus: [{ memory_bytes: 8 * 2 ** 30, memory_kind: 'discrete' }],
        host_ram_bytes: 64 * 2 ** 30,
        draining: false,
      },
    ]);
  });

  it('under explicit activation: shows it, refuses requests, and keeps its memory against --evict (capacity)', async () => {
    ok(
      await cli(
        'deploy',
        'model',
        '--file',
        file('pinned.yaml', simDeployment('pinned-model', 'vllm', [], 'lifecycle: { activation: explicit }')),
      ),
    );
    const pinnedId = await idOf('pinned-model');
    expect(JSON.parse(ok(await cli('status', 'deployment', 'pinned-model', '--json')))).toMatchObject({
      activation: 'explicit',
      state: 'stopped',
    });
    await until('its checkpoint to be measured', async () =>
      JSON.parse(ok(await cli('status', 'deployment', 'pinned-model', '--json'))).checkpoint === 'measured'
        ? true
        : undefined,
    );

    const inactive = apiErrors.deploymentInactive(pinnedId);
    expect(await ask('pinned-model')).toEqual({
      status: 409,
      body: { code: inactive.code, message: inactive.message, retryable: false },
    });

    const started = await cli('start', 'deployment', 'pinned-model', '--evict', '--wait', '--json');
    expect(started.code).toBe(0);
    const receipt = JSON.parse(started.stdout);
    expect(receipt).toEqual({
      deployment_id: pinnedId,
      name: 'pinned-model',
      switch_id: expect.stringMatching(new RegExp(`^${UUID}$`)),
      victims: [
        {
          deployment_id: await idOf('my-model'),
          name: 'my-model',
          instance_index: 0,
          gpu_indexes: [0],
          released: 'released: parked (host RAM)',
        },
      ],
      state: 'ready',
    });

    // The API names it by its ID; the line, as the operator named it.
    const capacity = apiErrors.insufficientCapacity('other-model', [{ name: 'pinned-model', keptBy: 'explicit' }]);
    refused(await cli('start', 'deployment', 'other-model', '--evict'), capacity);
    const asJson = await cli('start', 'deployment', 'other-model', '--evict', '--json');
    expect(asJson).toMatchObject({ code: 1, stderr: '' });
    expect(JSON.parse(asJson.stdout)).toEqual({
      error: { code: capacity.code, message: capacity.message, retryable: false },
    });
    // Named by its ID, it is said by its ID.
    const otherId = await idOf('other-model');
    refused(
      await cli('start', 'deployment', otherId, '--evict'),
      apiErrors.insufficientCapacity(otherId, [{ name: 'pinned-model', keptBy: 'explicit' }]),
    );
    // Deleted while it runs: the line says it was stopped first, by the switch it names.
    expect(ok(await cli('delete', 'deployment', 'pinned-model'))).toMatch(
      new RegExp(`^pinned-model: stopped and deleted\\nswitch_id: ${UUID} `),
    );
  });

  it('says why a checkpoint could not be measured, in its status, to start --wait and to a request; deployed again, it is measured again', async () => {
    // The simulator's declared weights are its checkpoint; a size it cannot read fails the measurement as missing files would.
    const broken = file('broken.yaml', simDeployment('broken-model', 'vllm', ['--sim-weights', 'lots']));
    ok(await cli('deploy', 'model', '--file', broken));
    const why = '--sim-weights lots: expected a size such as 8GiB or 512MiB';
    // --wait gives up once the measurement failed (it may have failed before the command began).
    refusedAfterWaiting(
      await cli('start', 'deployment', 'broken-model', '--wait'),
      apiErrors.checkpointUnmeasured('broken-model', why),
    );
    expect(JSON.parse(ok(await cli('status', 'deployment', 'broken-model', '--json')))).toMatchObject({
      revision: 1,
      checkpoint: 'failed',
      checkpoint_failure: why,
    });
    expect(ok(await cli('status', 'deployment', 'broken-model'))).toContain(
      `\ncheckpoint: failed\ncheckpoint_failure: ${why}\n`,
    );

    // A request is answered at once with why; it does not wait out the request deadline.
    const sentAt = Date.now();
    const id = await idOf('broken-model');
    expect(await ask('broken-model')).toEqual({
      status: 503,
      body: {
        code: 'unavailable',
        message: apiErrors.startFailed(id, `its checkpoint could not be measured: ${why}`).message,
        retryable: true,
      },
    });
    expect(Date.now() - sentAt).toBeLessThan(10_000);

    // The same document again is another try (as after copying the files in place): measured again, failed again.
    expect(ok(await cli('deploy', 'model', '--file', broken))).toBe(
      `broken-model: unchanged, revision 1 (deployment ${id}); its checkpoint is being measured\n`,
    );
    refusedAfterWaiting(
      await cli('start', 'deployment', 'broken-model', '--wait'),
      apiErrors.checkpointUnmeasured('broken-model', why),
    );
    // Corrected, it is a new revision, measured.
    ok(await cli('deploy', 'model', '--file', file('broken.yaml', simDeployment('broken-model'))));
    await until('the corrected revision to be measured', async () => {
      const d = JSON.parse(ok(await cli('status', 'deployment', 'broken-model', '--json'))) as {
        revision: number;
        checkpoint: string;
      };
      return d.revision === 2 && d.checkpoint === 'measured' ? true : undefined;
    });
    expect(ok(await cli('delete', 'deployment', 'broken-model'))).toBe('broken-model: deleted\n');
  });

  it("says why a start failed: the engine's last lines of stderr, to start --wait, in its status and in its switch", async () => {
    const last = 'RuntimeError: unknown flag: --host';
    const crashing = simDeployment('crashing-model', 'vllm', [
      '--sim-weights',
      '1GiB',
      '--sim-kv',
      '1GiB',
      '--sim-exit-at-start',
      last,
    ]);
    ok(await cli('deploy', 'model', '--file', file('crashing.yaml', crashing)));
    const r = await cli('start', 'deployment', 'crashing-model', '--wait');
    const id = await idOf('crashing-model');
    const lines = r.stderr.split('\n');
    // Named as the operator named it; its status, the API's own, names its ID.
    const at = lines.findIndex((l) =>
      l.startsWith(
        'capyctl: unavailable: deployment crashing-model failed to start: its engine exited (code 1); retry shortly.',
      ),
    );
    // About a screen of its traceback, ending with why.
    const tail = lines.slice(at + 1, -1);
    expect(tail).toHaveLength(20);
    expect(tail.at(-1)).toBe(`  ${last}`);
    const stderr = tail.map((l) => l.slice(2));
    const error = apiErrors.startFailedEngineExited(id, 'code 1', stderr);
    const said = apiErrors.startFailedEngineExited('crashing-model', 'code 1', stderr);
    expect(r).toMatchObject({ code: 1, stdout: '' });
    expect(r.stderr.endsWith(`capyctl: ${said.code}: ${said.message}\n`), r.stderr).toBe(true);

    expect(JSON.parse(ok(await cli('status', 'deployment', 'crashing-model', '--json')))).toMatchObject({
      start_failure: error.message,
    });
    expect(ok(await cli('status', 'deployment', 'crashing-model'))).toContain(`\nstart_failure: ${error.message}\n`);
    // The switch, as the Temporal Web UI finds it by its target, ended with the same words.
    const switches = await until('the switch to be listed', async () => {
      const ids: string[] = [];
      for await (const run of temporal.workflow.list({ query: 'CapyTarget = "crashing-model"' }))
        ids.push(run.workflowId);
      return ids.length > 0 ? ids : undefined;
    });
    expect(switches).toHaveLength(1);
    expect(await temporal.workflow.getHandle(switches[0]!).result()).toMatchObject({ outcome: 'start_failed', error });
    expect(ok(await cli('delete', 'deployment', 'crashing-model'))).toBe('crashing-model: deleted\n');
  });

  it('lists hosts, and drains one: what it holds stops, nothing starts there until the drain ends', async () => {
    ok(await cli('start', 'deployment', 'other-model'));
    expect(await cli('list', 'hosts')).toMatchObject({
      code: 0,
      stdout: expect.stringMatching(
        new RegExp(
          // other-model holds its GPU memory on the one card.
          `^ID {${host.length + 1}}GPUS \\(USED/TOTAL\\) +HOST RAM   STATE   LAST SEEN\\n` +
            `${host}   [1-9][\\d.]*GiB/8GiB discrete   64GiB      ready   \\d+s ago\\n$`,
        ),
      ),
    });
    const drained = await cli('drain', 'host', host);
    expect(drained.code).toBe(0);
    // Both models it holds stop, the parked one too.
    expect(drained.stdout.startsWith(`${host}: draining\n`)).toBe(true);
    expect(drained.stdout).toContain('my-model: stopped\n');
    expect(drained.stdout).toContain('other-model: stopped\n');
    expect(ok(await cli('list', 'hosts'))).toContain('   draining   ');
    refused(await cli('start', 'deployment', 'other-model'), apiErrors.noHost('other-model'));

    // The drain ended, models are placed there again.
    expect(ok(await cli('undrain', 'host', host))).toBe(`${host}: ready\n`);
    expect(ok(await cli('list', 'hosts'))).toContain('   ready   ');
    expect(ok(await cli('start', 'deployment', 'other-model', '--wait'))).toMatch(/^other-model: ready\n/);
    expect(ok(await cli('stop', 'deployment', 'other-model'))).toMatch(/^other-model: stopped\n/);
    refused(await cli('undrain', 'host', 'nowhere'), apiErrors.notFound('host', 'nowhere'));
  });

  it('ends every refusal with one line and a non-zero exit', async () => {
    refused(await cli('status', 'deployment', 'nope'), apiErrors.notFound('deployment', 'nope'));
    refused(
      await capyctl(['list', 'deployments'], { ...env(), CAPYCTL_ADMIN_TOKEN: 'wrong' }, dir),
      apiErrors.unauthorized('admin token'),
    );
    const elsewhere = mkdtempSync(join(tmpdir(), 'capyctl-elsewhere-'));
    const missing = await capyctl(['list', 'deployments'], env(), elsewhere);
    expect(missing).toMatchObject({ code: 2, stdout: '' });
    expect(missing.stderr).toBe(
      `capyctl: no admin token: pass --admin-token, set CAPYCTL_ADMIN_TOKEN, or point --admin-token-file (CAPYCTL_ADMIN_TOKEN_FILE) at the file the standalone writes; ${join(elsewhere, '.data', 'admin-token')} is missing or empty\n`,
    );
    // The file named, or the token itself, from anywhere.
    ok(
      await capyctl(['list', 'deployments', '--admin-token-file', join(dir, '.data', 'admin-token')], env(), elsewhere),
    );
    ok(await capyctl(['list', 'deployments'], { ...env(), CAPYCTL_ADMIN_TOKEN: standalone.adminToken }, elsewhere));
    expect(await cli('park', 'deployment')).toMatchObject({
      code: 2,
      stderr: expect.stringMatching(/^capyctl: usage: capyctl park deployment NAME /),
    });
  });

  it('reaches the server as host:port without a scheme, and says when --server is another capyctl listener', async () => {
    const hostPort = new URL(standalone.managementUrl).host;
    expect(await cli('list', 'deployments', '--server', hostPort)).toEqual(await cli('list', 'deployments'));
    const inference = new URL(standalone.inferenceUrl).host;
    expect(await cli('list', 'deployments', '--server', inference)).toEqual({
      code: 1,
      stdout: '',
      stderr:
        `capyctl: http://${inference} is a capyctl listener without the management API (GET ` +
        "/management/v1/deployments: route not found), such as the inference listener or a host's ingress; " +
        '--server (or CAPYCTL_SERVER) names the management listener (listen.management, default 127.0.0.1:7443)\n',
    });
  });

  it('issues a host token a host agent registers with', async () => {
    const issued = await cli('create', 'host-token');
    expect(issued).toMatchObject({ code: 0, stderr: '' });
    expect(issued.stdout).toMatch(/^capy_host_\S+\n$/);
    const registered = await request(`${standalone.managementUrl}/management/v1/hosts/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${issued.stdout.trim()}` },
      body: JSON.stringify({
        host_id: 'spare-box',
        gpus: [],
        host_ram_bytes: 2 ** 30,
        settings: {},
        ingress_url: 'http://127.0.0.1:9',
      }),
    });
    expect(registered.statusCode).toBe(200);
    expect(await registered.body.json()).toEqual({ host_id: 'spare-box', ingress_secret: expect.any(String) });
  });

  it('explains each command with an example', async () => {
    const help = await capyctl(['start', 'deployment', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('usage: capyctl start deployment NAME [--evict] [--wait] [--json]');
    expect(help.stdout).toContain('example:\n  capyctl start deployment other-model --evict --wait\n');
  });
});
