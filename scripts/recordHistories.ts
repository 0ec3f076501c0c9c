/**
 * Records the histories of the workflows a running capyctl made, for `test/replay.test.ts`, which
 * replays them with the workflow code as it is now: a change to a workflow that would break the
 * replay of one already running (a step added, removed or reordered without `patched()`) fails there.
 *
 * Run it against a standalone's Temporal after driving the cases worth keeping (a request that
 * wakes a model, a start with --evict, an operator's park):
 *
 *   npx tsx scripts/recordHistories.ts [--address 127.0.0.1:7233] [--namespace default] [--out DIR]
 *
 * It keeps the newest finished switch of each kind (its summary's first word and its outcome) and
 * the host schedulers' current runs, each as `<workflow id with / as ->_<run id>.json`.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import { historyToJSON } from '@temporalio/common/lib/proto-utils.js';
import { searchAttributes } from '../workflows/definitions.js';

// Where test/replay.test.ts reads them.
const HISTORIES_DIR = 'test/fixtures/histories';

const { values } = parseArgs({
  options: {
    address: { type: 'string', default: '127.0.0.1:7233' },
    namespace: { type: 'string', default: 'default' },
    out: { type: 'string', default: HISTORIES_DIR },
  },
});

const connection = await Connection.connect({ address: values.address });
try {
  const client = new Client({ connection, namespace: values.namespace });
  const kept = new Map<string, { workflowId: string; runId: string }>();
  const query = `WorkflowType = 'switchWorkflow' AND ExecutionStatus != 'Running'`;
  for await (const w of client.workflow.list({ query })) {
    const described = await client.workflow.getHandle(w.workflowId, w.runId).describe();
    // The summary says what the switch did ("wake chat-a, park chat-b"): its verbs make its kind.
    const verbs = ((await described.staticSummary()) ?? '').match(/\b(wake|start|park|stop)\b/g) ?? [];
    const kind = `${[...new Set(verbs)].join('-')}-${w.typedSearchAttributes.get(searchAttributes.outcome) ?? w.status.name}`;
    if (!kept.has(kind)) kept.set(kind, { workflowId: w.workflowId, runId: w.runId });
  }
  for await (const w of client.workflow.list({ query: `WorkflowType = 'hostScheduler'` })) {
    kept.set(`scheduler-${w.workflowId}-${w.runId}`, { workflowId: w.workflowId, runId: w.runId });
  }
  mkdirSync(values.out, { recursive: true });
  for (const { workflowId, runId } of kept.values()) {
    const history = await client.workflow.getHandle(workflowId, runId).fetchHistory();
    const file = join(values.out, `${workflowId.replaceAll('/', '-')}_${runId}.json`);
    writeFileSync(file, `${historyToJSON(history)}\n`);
    console.log(`${file}: ${history.events?.length ?? 0} events`);
  }
} finally {
  await connection.close();
}
