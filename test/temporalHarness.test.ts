import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { type AddressInfo, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startDevServer } from '../standalone/temporalDevServer.js';
import { searchAttributes } from '../workflows/definitions.js';
import { searchableWorkflow } from './fixtures/searchableWorkflow.js';
import { isRunning } from './support/processes.js';
import { workerConnection } from './support/temporal.js';
import { until } from './support/until.js';

describe('the real Temporal dev server the harness started', () => {
  let connection: Connection;
  let client: Client;
  beforeAll(async () => {
    connection = await Connection.connect({ address: inject('temporalAddress') });
    client = new Client({ connection });
  });
  afterAll(() => connection.close());

  it('has the project search attributes registered with their types', async () => {
    const { customAttributes } = await connection.operatorService.listSearchAttributes({ namespace: 'default' });
    // The API's enum values: 2 = KEYWORD, 7 = KEYWORD_LIST.
    expect(customAttributes).toMatchObject({ CapyTarget: 2, CapyVictims: 7, CapyHost: 2, CapyOutcome: 2 });
  });

  it('runs a workflow on a worker in this process and lists it by victim, as the Web UI would', async () => {
    const taskQueue = `harness-${randomUUID()}`;
    const worker = await Worker.create({
      connection: await workerConnection(),
      taskQueue,
      workflowsPath: fileURLToPath(new URL('./fixtures/searchableWorkflow.ts', import.meta.url)),
    });
    const victim = `chat-${randomUUID().slice(0, 8)}`;
    const result = await worker.runUntil(
      client.workflow.execute(searchableWorkflow, {
        taskQueue,
        workflowId: `harness/${randomUUID()}`,
        args: ['chat-b', [victim], 'gpu-box'],
      }),
    );
    expect(result).toBe(`wake chat-b, park ${victim} on gpu-box`);

    let listed: string[] = [];
    for (let i = 0; i < 50 && listed.length === 0; i++) {
      listed = [];
      for await (const wf of client.workflow.list({ query: `${searchAttributes.victims.name} = '${victim}'` })) {
        listed.push(wf.typedSearchAttributes.get(searchAttributes.target) ?? '');
      }
      if (listed.length === 0) await new Promise((r) => setTimeout(r, 200));
    }
    expect(listed).toEqual(['chat-b']);
  });
});

describe('a dev server that cannot start', () => {
  it('fails at once on a port another process holds, and says why from its log', async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const dir = mkdtempSync(join(tmpdir(), 'capyctl-devserver-'));
    try {
      const { port } = taken.address() as AddressInfo;
      const started = Date.now();
      await expect(
        startDevServer({ dbFile: join(dir, 'temporal.db'), logFile: join(dir, 'temporal.log'), port }),
      ).rejects.toThrow(
        new RegExp(`the Temporal dev server at 127.0.0.1:${port} exited during start: .*address already in use`),
      );
      expect(Date.now() - started).toBeLessThan(15_000);
    } finally {
      taken.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('a dev server on ports of its own choosing that exits during start', () => {
  it('is tried again on fresh ports, three times in all, then fails saying why', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'capyctl-devserver-'));
    const logFile = join(dir, 'temporal.log');
    try {
      // Every try fails the same way here (no folder for its database); a lost port race fails one.
      await expect(startDevServer({ dbFile: join(dir, 'missing', 'temporal.db'), logFile })).rejects.toThrow(
        /exited during start: .*no such file or directory/,
      );
      const tries = readFileSync(logFile, 'utf8')
        .split('\n')
        .filter((line) => line.includes('failed starting server'));
      expect(tries).toHaveLength(3);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('a dev server whose capyctl process is killed outright (SIGKILL)', () => {
  it('ends with it, so it holds no port the next start needs', async () => {
    const parent = spawn(
      process.execPath,
      ['--import', 'tsx', fileURLToPath(new URL('./fixtures/devServerProcess.ts', import.meta.url))],
      {
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    let printed = '';
    parent.stdout!.on('data', (d) => (printed += d));
    try {
      const { devServerPid } = await until(
        'the dev server to start',
        () => (printed.includes('\n') ? (JSON.parse(printed) as { devServerPid: number }) : undefined),
        60_000,
      );
      expect(isRunning(devServerPid)).toBe(true);
      parent.kill('SIGKILL');
      await until('the dev server to end', () => (isRunning(devServerPid) ? undefined : true), 10_000);
    } finally {
      parent.kill('SIGKILL');
    }
  });
});
