/**
 * `npm run demo`: replays the spec's "Example: two apps, one GPU" against a running standalone (its
 * example models chat-a and chat-b) and prints the timeline it observed. `--json` prints the
 * timeline with every request and switch seen, for a script.
 */
import { parseArgs } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import { connectionOptions, managementClient } from '../../cli/managementClient.js';
import { switchesSince } from './switchHistory.js';
import { renderTimeline, timelineOf } from './timeline.js';
import { playTwoApps } from './twoApps.js';

const { values } = parseArgs({
  options: {
    inference: { type: 'string', default: 'http://127.0.0.1:8080' },
    // The management API and its admin token, found as `capyctl` finds them.
    ...connectionOptions,
    temporal: { type: 'string', default: '127.0.0.1:7233' },
    namespace: { type: 'string', default: 'default' },
    json: { type: 'boolean', default: false },
  },
});

const models = { app1Model: 'chat-a', app2Model: 'chat-b' };

/** The host that runs App 1's model: its switches are the ones to read. */
async function hostOf(model: string): Promise<string> {
  const management = await managementClient(values);
  const load = await management.call<{ deployments: Array<{ name: string; instances: Array<{ host_id: string }> }> }>(
    'GET',
    '/metrics/load',
  );
  const hostId = load.deployments.find((d) => d.name === model)?.instances[0]?.host_id;
  if (!hostId) throw new Error(`${model} runs on no host the management API at ${management.url} knows`);
  return hostId;
}

// App 1's answers take 2.5 s at the example models' 40 tokens a second: the drain has work to wait for.
const run = await playTwoApps({
  inferenceUrl: values.inference,
  ...models,
  app1Tokens: 100,
  staggerMs: 1_250,
  leadMs: 1_500,
  retryMs: 250,
});
const client = new Client({
  connection: await Connection.connect({ address: values.temporal }),
  namespace: values.namespace,
});
const switches = await switchesSince(client, await hostOf(models.app1Model), run.zeroMs - 1_000);
await client.connection.close();
const timeline = timelineOf(run, switches);
process.stdout.write(
  values.json ? `${JSON.stringify({ timeline, ...run, switches }, null, 2)}\n` : `${renderTimeline(timeline)}\n`,
);
