/**
 * How long the first request after a server restart waits, when the server was stopped cleanly
 * (SIGTERM) and when it was killed (SIGKILL): a `capyctl start server` and one host agent, each its
 * own process, two models that do not fit together, so the first request after each restart is a
 * switch. Timed from the restarted server's start to that request's answer, alternating the two
 * ways of stopping. `--before REF` runs the same from that commit's checkout first.
 *
 * Run with `npx tsx bench/recoveryAfterKill.ts [--before REF]` (it starts its own Temporal dev
 * server and uses the machine's Postgres, as the tests do).
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { outputAt } from './beforeCheckout.js';
import { startDevServer } from '../standalone/temporalDevServer.js';
import { Cluster } from '../test/support/cluster.js';
import { simDeployment } from '../test/support/lifecycle.js';
import { ensurePostgres, POSTGRES_ADMIN_URL } from '../test/support/postgres.js';

const ROUNDS = 5;
const median = (xs: readonly number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function measure(): Promise<Record<'SIGTERM' | 'SIGKILL', number[]>> {
  const dir = mkdtempSync(join(tmpdir(), 'capyctl-recovery-'));
  const [temporal] = await Promise.all([
    startDevServer({ dbFile: join(dir, 'temporal.db'), logFile: join(dir, 'temporal.log') }),
    ensurePostgres(),
  ]);
  const cluster = await Cluster.start({
    services: { temporalAddress: temporal.address, postgresAdminUrl: POSTGRES_ADMIN_URL },
    hosts: [{ gpuMemory: '8GiB' }],
  });
  const times: Record<'SIGTERM' | 'SIGKILL', number[]> = { SIGTERM: [], SIGKILL: [] };
  try {
    const models = [
      (await cluster.deploy(simDeployment('chat-a'))).name,
      (await cluster.deploy(simDeployment('chat-b'))).name,
    ];
    let next = 0;
    const ask = async () => {
      const reply = await cluster.chat(models[next++ % 2]!);
      if (reply.status !== 200) throw new Error(`answered ${reply.status}: ${JSON.stringify(reply.body)}`);
    };
    await ask();
    await ask();
    for (let round = 0; round < ROUNDS; round++) {
      for (const signal of ['SIGTERM', 'SIGKILL'] as const) {
        await cluster.server.stop(signal);
        const began = Date.now();
        await cluster.startServer();
        await ask();
        times[signal].push(Date.now() - began);
      }
    }
    return times;
  } finally {
    await cluster.close();
    await temporal.stop();
  }
}

const { before } = parseArgs({ options: { before: { type: 'string' } } }).values;
if (before) console.log(`before (${before}):\n${outputAt(before, 'bench/recoveryAfterKill.ts').replace(/^/gm, '  ')}`);
const times = await measure();
console.log(
  `restart → first answer (a switch), median of ${ROUNDS}: stopped cleanly ${median(times.SIGTERM)} ms, killed ${median(times.SIGKILL)} ms (killed less clean: ${median(times.SIGKILL) - median(times.SIGTERM)} ms)`,
);
console.log(`  each: SIGTERM ${times.SIGTERM.join(', ')}; SIGKILL ${times.SIGKILL.join(', ')}`);
