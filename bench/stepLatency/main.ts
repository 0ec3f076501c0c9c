/**
 * Where a remote step's time goes on Temporal: 12 no-op activities run one after another on another
 * worker's task queue (as a switch runs its host steps), in parallel, and as local activities; on a
 * dev server with Temporal's defaults and on one with capyctl's settings (lowLatencyArgs in
 * standalone/temporalDevServer.ts), both on their SQLite file. Prints the median per step and the spans
 * read from the histories: how long an activity task and the workflow task after it waited to be
 * picked up, and how long each ran.
 *
 * Run with `npx tsx bench/stepLatency/main.ts` (starts its own Temporal dev servers).
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime, Worker } from '@temporalio/worker';
import { startDevServer } from '../../standalone/temporalDevServer.js';
import { workflowBundle } from '../../server/workflowBundle.js';
import { noopActivities } from './activities.js';
import { spansOf } from './historySpans.js';

const STEPS = 12;
const RUNS = 9;
const median = (xs: readonly number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const KINDS = [
  ['sequentialRemote', 'one after another, remote'],
  ['parallelRemote', 'all at once, remote'],
  ['sequentialLocal', 'one after another, local'],
] as const;

async function measure(label: string, temporalDefaults: boolean) {
  const dir = mkdtempSync(join(tmpdir(), 'capyctl-steps-'));
  const temporal = await startDevServer({
    dbFile: join(dir, 'temporal.db'),
    logFile: join(dir, 'temporal.log'),
    temporalDefaults,
  });
  const client = new Client({ connection: await Connection.connect({ address: temporal.address }) });
  const bundle = await workflowBundle(fileURLToPath(new URL('./workflows.ts', import.meta.url)));
  const wfQueue = `steps-workflows-${process.pid}`;
  const remoteQueue = `steps-remote-${process.pid}`;
  const make = async (taskQueue: string, withWorkflows: boolean) =>
    Worker.create({
      connection: await NativeConnection.connect({ address: temporal.address }),
      taskQueue,
      activities: noopActivities,
      ...(withWorkflows ? { workflowBundle: bundle } : {}),
    });
  const workers = [await make(wfQueue, true), await make(remoteQueue, false)];
  const running = workers.map((w) => w.run());
  console.log(`\n${label}`);
  try {
    for (const [workflow, kind] of KINDS) {
      const totals: number[] = [];
      const spans: Record<string, number[]> = {};
      for (let r = 0; r < RUNS; r++) {
        const began = Date.now();
        const handle = await client.workflow.start(workflow, {
          taskQueue: wfQueue,
          workflowId: `${workflow}-${r}`,
          args: [{ steps: STEPS, taskQueue: remoteQueue }],
        });
        await handle.result();
        totals.push(Date.now() - began);
        for (const [k, v] of Object.entries(spansOf(await handle.fetchHistory()))) (spans[k] ??= []).push(...v);
      }
      const spanText = Object.entries(spans)
        .map(([k, v]) => `${k} ${median(v).toFixed(0)}`)
        .join(', ');
      console.log(
        `  ${kind.padEnd(27)} ${STEPS} steps ${String(median(totals)).padStart(5)} ms, ${(median(totals) / STEPS).toFixed(1).padStart(5)} ms a step | span medians (ms): ${spanText}`,
      );
    }
  } finally {
    for (const w of workers) w.shutdown();
    await Promise.all(running);
    await client.connection.close();
    await temporal.stop();
  }
}

Runtime.install({ logger: new DefaultLogger('WARN') });
await measure("Temporal's defaults", true);
await measure("capyctl's dev server settings (standalone/temporalDevServer.ts lowLatencyArgs)", false);
