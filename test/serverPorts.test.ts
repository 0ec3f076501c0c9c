/**
 * A second `capyctl start server` on the addresses (and the task queue) of one already running: it
 * refuses to start, with one line, before it takes any of the first server's work. And a
 * standalone's own Temporal dev server, on the ports its settings give it.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../processes/freePort.js';
import { CapyProcess, Cluster } from './support/cluster.js';
import { simDeployment } from './support/lifecycle.js';
import { readyLineOf, type StandaloneProcess, startStandaloneProcess } from './support/standalone.js';

describe('a second server on the same ports', () => {
  let cluster: Cluster;
  let second: CapyProcess | undefined;

  beforeAll(async () => {
    cluster = await Cluster.start({ hosts: [{ gpuMemory: '8GiB' }] });
    await cluster.deploy(simDeployment('first-a'));
    await cluster.deploy(simDeployment('first-b'));
  }, 120_000);
  afterAll(async () => {
    await second?.stop('SIGKILL');
    await cluster?.close();
  }, 60_000);

  it('exits non-zero with one line naming the address, and the first server still switches models', async () => {
    const management = new URL(cluster.managementUrl).host;
    const inference = new URL(cluster.inferenceUrl).host;
    second = new CapyProcess(
      [
        'start',
        'server',
        '--set',
        `listen.management=${management}`,
        '--set',
        `listen.inference=${inference}`,
        '--set',
        `temporal.address=${cluster.services.temporalAddress}`,
      ],
      cluster.serverEnv(),
    );
    const code = await Promise.race([
      second.exited,
      new Promise((r) => setTimeout(() => r('still running after 60 s'), 60_000)),
    ]);
    expect(code, second.output().slice(-2_000)).toBe(1);
    expect(second.output()).toMatch(
      new RegExp(`^capyctl: cannot listen on ${management.replace(/\./g, '\\.')}: address already in use$`, 'm'),
    );
    expect(second.output()).not.toMatch(/server started/);

    // A switch on the first server: a start, then the other model parks the first to make room.
    expect((await cluster.chat('first-a')).status).toBe(200);
    expect((await cluster.chat('first-b')).status).toBe(200);
    expect((await cluster.status('first-a')).state).toBe('parked');
    expect((await cluster.status('first-b')).state).toBe('ready');
  }, 120_000);

  it('refuses a standalone the same way, with one line', async () => {
    const inference = new URL(cluster.inferenceUrl).host;
    const standalone = new CapyProcess(
      [
        'start',
        'standalone',
        '--set',
        `server.listen.inference=${inference}`,
        '--set',
        'server.listen.management=127.0.0.1:0',
        '--set',
        `server.temporal.address=${cluster.services.temporalAddress}`,
        '--set',
        `data_dir=${cluster.dir}/standalone`,
      ],
      {},
    );
    const code = await Promise.race([
      standalone.exited,
      new Promise((r) => setTimeout(() => r('still running after 60 s'), 60_000)),
    ]);
    expect(code, standalone.output().slice(-2_000)).toBe(1);
    expect(standalone.output()).toMatch(
      new RegExp(`^capyctl: cannot listen on ${inference.replace(/\./g, '\\.')}: address already in use$`, 'm'),
    );
  }, 90_000);
});

describe("a standalone's own Temporal dev server", () => {
  let standalone: StandaloneProcess | undefined;
  afterAll(async () => {
    await standalone?.stop();
  });

  it('listens on the ports temporal_dev_server sets, its Web UI too, and the standalone runs on it', async () => {
    const [port, uiPort] = [await freePort(), await freePort()];
    standalone = await startStandaloneProcess({
      dir: mkdtempSync(join(tmpdir(), 'capyctl-devports-')),
      sets: [`temporal_dev_server.port=${port}`, `temporal_dev_server.ui_port=${uiPort}`, 'examples=false'],
    });
    const ready = readyLineOf(standalone.output())!;
    expect(ready).toMatchObject({ temporalAddress: `127.0.0.1:${port}`, temporalUiUrl: `http://127.0.0.1:${uiPort}` });
    expect((await request(`http://127.0.0.1:${uiPort}/`)).statusCode).toBe(200);
    // The host's scheduler runs there: the standalone's lifecycle is on this Temporal.
    const connection = await Connection.connect({ address: `127.0.0.1:${port}` });
    try {
      const described = await new Client({ connection }).workflow
        .getHandle(`host-scheduler/${standalone.hostId}`)
        .describe();
      expect(described.status.name).toBe('RUNNING');
    } finally {
      await connection.close();
    }
    expect(await standalone.stop()).toBe(0);
  }, 120_000);
});
