/**
 * The wall time of a `capyctl` call, whole process, as an operator's shell sees it: `list
 * deployments` against a running server (three deployments), side by side in one run with bare
 * `node -e 0` (the floor) and, given `--before REF`, the same call from that commit's checkout
 * (a temporary git worktree sharing this node_modules). They alternate in each round, so the
 * machine's noise falls on all of them alike.
 *
 * Run with `npx tsx bench/cliStartup.ts [--before REF]` (it starts its own Temporal dev server and
 * a server process, and uses the machine's Postgres, as the tests do).
 */
import { execFile } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import YAML from 'yaml';
import { checkoutOf } from './beforeCheckout.js';
import { startDevServer } from '../standalone/temporalDevServer.js';
import { CAPYCTL } from '../test/support/capyctl.js';
import { Cluster, CLUSTER_ADMIN_TOKEN } from '../test/support/cluster.js';
import { simDeployment } from '../test/support/lifecycle.js';
import { ensurePostgres, POSTGRES_ADMIN_URL } from '../test/support/postgres.js';

const ROUNDS = 30;
const median = (xs: readonly number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

function timed(args: readonly string[], env: NodeJS.ProcessEnv): Promise<number> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    execFile(process.execPath, args, { env: { ...process.env, ...env } }, (error, _stdout, stderr) => {
      if (error) reject(new Error(`${args.join(' ')}: ${stderr}`));
      else resolve(performance.now() - started);
    });
  });
}

async function main() {
  const { before } = parseArgs({ options: { before: { type: 'string' } } }).values;
  const dir = mkdtempSync(join(tmpdir(), 'capyctl-bench-'));
  const [temporal] = await Promise.all([
    startDevServer({ dbFile: join(dir, 'temporal.db'), logFile: join(dir, 'temporal.log') }),
    ensurePostgres(),
  ]);
  const cluster = await Cluster.start({
    services: { temporalAddress: temporal.address, postgresAdminUrl: POSTGRES_ADMIN_URL },
  });
  const old = before === undefined ? undefined : checkoutOf(before);
  const oldCapyctl = old && join(old.dir, 'bin/capyctl.js');
  try {
    for (const name of ['chat-a', 'chat-b', 'chat-c']) {
      const deployed = await cluster.api('POST', '/management/v1/deployments', YAML.parse(simDeployment(name)));
      if (deployed.status >= 300) throw new Error(`deploy ${name}: ${JSON.stringify(deployed.body)}`);
    }
    const env = { CAPYCTL_SERVER: cluster.managementUrl, CAPYCTL_ADMIN_TOKEN: CLUSTER_ADMIN_TOKEN };
    const ways: Record<string, string[]> = {
      'node -e 0 (the floor)': ['-e', '0'],
      ...(old && { [`capyctl list deployments at ${before}`]: [oldCapyctl!, 'list', 'deployments'] }),
      'capyctl list deployments, this checkout': [CAPYCTL, 'list', 'deployments'],
    };
    // A first call after a change may build (the bundle, tsx's cache): not what an operator's calls cost.
    for (const args of Object.values(ways)) await timed(args, env);
    const times = Object.fromEntries(Object.keys(ways).map((k) => [k, [] as number[]]));
    for (let round = 0; round < ROUNDS; round++) {
      for (const [name, args] of Object.entries(ways)) times[name]!.push(await timed(args, env));
    }
    const now = median(times['capyctl list deployments, this checkout']!);
    console.log(`| way (${ROUNDS} runs each, alternating) | median ms | p90 ms | vs this checkout |`);
    console.log('| --- | ---: | ---: | ---: |');
    for (const [name, xs] of Object.entries(times)) {
      const sorted = [...xs].sort((a, b) => a - b);
      console.log(
        `| ${name} | ${median(xs).toFixed(0)} | ${sorted[Math.floor(sorted.length * 0.9)]!.toFixed(0)} | ${(median(xs) / now).toFixed(2)}× |`,
      );
    }
  } finally {
    old?.remove();
    await cluster.close();
    await temporal.stop();
  }
}

await main();
