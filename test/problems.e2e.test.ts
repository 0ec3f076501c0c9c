/**
 * What went wrong, where the operator looks: an engine that exits unasked, again and again, and a park
 * the engine refused, each shown by `status deployment` (JSON and text) and `list deployments`, over a
 * real server, host agent, simulator engines, Temporal and Postgres.
 */
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DeploymentBody } from '../api/deployments.js';
import type { StatusHistoryReply } from '../api/statusHistory.js';
import type { SwitchBody, SwitchListReply } from '../api/switches.js';
import type { Deployment } from '../store/deployments.js';
import { capyctl } from './support/capyctl.js';
import { simDeployment } from './support/lifecycle.js';
import { ADMIN_TOKEN, type ServerBench, startServerBench } from './support/serverBench.js';
import { until } from './support/until.js';

describe("a deployment's last problem, restarts and crash loop", () => {
  let bench: ServerBench;
  let chat: Deployment;
  let deep: Deployment;

  beforeAll(async () => {
    bench = await startServerBench({ gpuMemory: '16GiB' });
    chat = await bench.deploy('chat');
    deep = await bench.deploy('deep-chat', simDeployment('deep-chat', 'vllm', [], 'residency: deep\n'));
  });

  afterAll(async () => {
    await bench?.close();
  });

  const management = async <T>(method: 'GET' | 'POST', path: string): Promise<T> => {
    const res = await request(`${bench.server.managementUrl}/management/v1${path}`, {
      method,
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    });
    expect(res.statusCode).toBe(200);
    return (await res.body.json()) as T;
  };
  const status = (name: string) => management<DeploymentBody>('GET', `/deployments/${name}`);
  const cli = async (...args: string[]) => {
    const r = await capyctl([...args, '--server', bench.server.managementUrl, '--admin-token', ADMIN_TOKEN]);
    expect(r).toMatchObject({ code: 0, stderr: '' });
    return r.stdout;
  };

  /** Serves a request for `d`, then crashes its engine and waits for the exit to be recorded. */
  async function serveThenCrash(d: Deployment, restartsBefore: number): Promise<DeploymentBody> {
    expect((await bench.chat(d)).status).toBe(200);
    await bench.fault(d, { crash: true });
    return until(`exit ${restartsBefore + 1} of ${d.name} to be recorded`, async () => {
      const s = await status(d.name);
      return s.restarts > restartsBefore && s.state === 'stopped' ? s : undefined;
    });
  }

  it('shows an engine that exited: when, its code, its last stderr lines, and counts it', async () => {
    const before = Date.now();
    const s = await serveThenCrash(chat, 0);
    expect(s).toMatchObject({
      state: 'stopped',
      restarts: 1,
      crash_loop: false,
      last_problem: {
        kind: 'engine_exited',
        host_id: bench.hostId,
        instance_index: 0,
        generation: 1,
        message: 'its engine exited unasked (code 1)',
        exit_code: 1,
        signal: null,
        stderr: ['[sim] simulated crash'],
      },
    });
    expect(Date.parse(s.last_problem!.at)).toBeGreaterThanOrEqual(before - 1000);
    // A stopped model that never started has no problem to show: the two are told apart.
    expect(await status(deep.name)).toMatchObject({ state: 'stopped', restarts: 0, crash_loop: false });
    expect((await status(deep.name)).last_problem).toBeUndefined();
  });

  it('says a crash loop beside the stopped state once it keeps exiting, and not once it serves again', async () => {
    await serveThenCrash(chat, 1);
    const s = await serveThenCrash(chat, 2);
    expect(s).toMatchObject({ state: 'stopped', restarts: 3, crash_loop: true, last_problem: { generation: 3 } });

    expect(await cli('list', 'deployments')).toBe(
      [
        'NAME        STATE                  READY   REVISION   HOSTS   RESTARTS',
        'chat        stopped (crash loop)   0/1     1          -       3',
        'deep-chat   stopped                0/1     1          -       0',
        '',
      ].join('\n'),
    );
    const text = await cli('status', 'deployment', 'chat');
    expect(text).toContain('\nrestarts: 3\ncrash_loop: yes: its engine ended unasked 3 times within 10 minutes\n');
    expect(text).toContain(
      `\nlast_problem: engine_exited at ${s.last_problem!.at} on ${bench.hostId} (instance 0, generation 3): ` +
        'its engine exited unasked (code 1)\n  [sim] simulated crash\n',
    );

    // A request starts it again (it is not explicit); serving, it is no longer in a crash loop.
    expect((await bench.chat(chat)).status).toBe(200);
    expect(await status(chat.name)).toMatchObject({ state: 'ready', restarts: 3, crash_loop: false });
  });

  it('says why a park failed in the switch receipt and in status, in the engine’s own answer', async () => {
    expect((await bench.chat(deep)).status).toBe(200);
    // Dev mode and sleep mode are on (its /sleep answers); this build lacks only the weight reload's route.
    await bench.fault(deep, { missing_routes: ['/collective_rpc'] });

    const receipt = await management<{ state: string; switch_id: string }>('POST', `/deployments/${deep.name}/park`);
    expect(receipt.state).toBe('parking');
    const ended = await until('the park to end', async () => {
      const sw = await management<SwitchBody>('GET', `/switches/${receipt.switch_id}`);
      return sw.outcome === 'running' ? undefined : sw;
    });
    const cause = new RegExp(
      '^vLLM 0\\.10\\.1 at http://127\\.0\\.0\\.1:\\d+ cannot park at tier deep: it has no POST /collective_rpc ' +
        '\\(GET answered 404 \\{"detail":"Not Found"\\}\\); its POST /sleep, GET /is_sleeping, POST /wake_up answer, ' +
        'so what switches these routes on is set and this vLLM build lacks it$',
    );
    expect(ended.outcome).toBe('park_failed');
    const released = ended.victims[0]!.released;
    expect(released).toMatch(/^released: stopped \(its park failed: /);
    expect(released.slice('released: stopped (its park failed: '.length, -1)).toMatch(cause);

    const s = await status(deep.name);
    expect(s).toMatchObject({
      state: 'stopped',
      restarts: 0,
      crash_loop: false,
      last_problem: { kind: 'park_failed', host_id: bench.hostId, generation: 1 },
    });
    expect(s.last_problem!.message).toMatch(cause);
    expect(s.last_problem!.message).not.toContain('--enable-sleep-mode');
    expect(await cli('status', 'deployment', deep.name)).toContain(
      `\nlast_problem: park_failed at ${s.last_problem!.at} on ${bench.hostId} (instance 0, generation 1): ` +
        `${s.last_problem!.message}\n`,
    );
  });

  it('says why a deployment no GPU could hold waits in vain: its need and the largest GPU', async () => {
    const huge = await bench.deploy('huge', simDeployment('huge', 'vllm', ['--sim-weights', '20GiB']));
    expect((await status('huge')).fits_nowhere).toMatch(
      new RegExp(
        `^deployment ${huge.id} needs [\\d.]+ GiB of GPU memory, more than the largest GPU it may run on has ` +
          `\\(16 GiB on ${bench.hostId}\\)$`,
      ),
    );
    expect((await status(chat.name)).fits_nowhere).toBeUndefined();
    const listed = await management<{ deployments: DeploymentBody[] }>('GET', '/deployments');
    expect(listed.deployments.find((d) => d.name === 'huge')?.fits_nowhere).toBe((await status('huge')).fits_nowhere);
  });

  it('keeps the status page’s last hour: waiting requests sampled, switches with how long each took, errors by code', async () => {
    // A model its operator stopped is answered 409, counted by its code.
    const stop = await request(`${bench.server.managementUrl}/management/v1/deployments/${chat.name}/stop`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    });
    expect(stop.statusCode).toBe(200);
    await stop.body.dump();
    expect(await bench.chat(chat)).toMatchObject({ status: 409, body: { code: 'deployment_stopped' } });
    expect(await bench.chat(chat)).toMatchObject({ status: 409 });

    const history = await management<StatusHistoryReply>('GET', '/status/history');
    expect(history.sample_every_ms).toBe(10_000);
    expect(history.errors_by_code).toContainEqual({ code: 'deployment_stopped', count: 2 });
    // Sampled as the server started: nothing waited then.
    expect(history.waiting[0]).toMatchObject({ waiting: 0 });
    // Every switch of this bench ended within the hour: each start, the failed park, the stop.
    const receipts = await management<SwitchListReply>('GET', '/switches?limit=100');
    const ended = receipts.switches.filter((sw) => sw.finished_at !== null);
    expect(history.switches.map((sw) => sw.switch_id)).toEqual(ended.map((sw) => sw.switch_id).reverse());
    for (const sw of history.switches) {
      const receipt = ended.find((r) => r.switch_id === sw.switch_id)!;
      expect(sw).toEqual({
        switch_id: receipt.switch_id,
        started_at: receipt.started_at,
        ms: Date.parse(receipt.finished_at!) - Date.parse(receipt.started_at),
        outcome: receipt.outcome,
      });
    }
    expect(history.switches.map((sw) => sw.outcome)).toContain('park_failed');
  });
});
