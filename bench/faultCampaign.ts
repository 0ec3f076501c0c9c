/**
 * The fault campaign's long form (issue 18): every case (the server, a host agent or Temporal killed
 * with SIGKILL at each phase of a switch) run several times, then the cases × outcomes table in
 * markdown. See test/support/faultCampaign.ts for what a case does and counts.
 *
 *   npx tsx bench/faultCampaign.ts [--runs 10] [--cases server:park,host:start,…]
 *
 * It starts its own Temporal dev server and uses the machine's Postgres, as the tests do.
 */
import { parseArgs } from 'node:util';
import {
  type CaseOutcome,
  type FaultCase,
  FaultCampaign,
  faultTable,
  killables,
  type Killable,
  type Phase,
  phases,
} from '../test/support/faultCampaign.js';
import { ensurePostgres, POSTGRES_ADMIN_URL } from '../test/support/postgres.js';

const { values } = parseArgs({ options: { runs: { type: 'string', default: '10' }, cases: { type: 'string' } } });
const runs = Number(values.runs);
const all: FaultCase[] = killables.flatMap((kill) => phases.map((phase) => ({ kill, phase })));
const cases = values.cases
  ? values.cases.split(',').map((c) => {
      const [kill, phase] = c.split(':') as [Killable, Phase];
      if (!killables.includes(kill) || !phases.includes(phase))
        throw new Error(
          `not a case: ${c} (kill:phase, kill one of ${killables.join(', ')}, phase one of ${phases.join(', ')})`,
        );
      return { kill, phase };
    })
  : all;

async function main() {
  await ensurePostgres();
  const campaign = await FaultCampaign.start({
    postgresAdminUrl: POSTGRES_ADMIN_URL,
    requestDeadlineMs: 120_000,
    settleMs: 120_000,
    log: (line) => process.stderr.write(`${new Date().toISOString()} ${line}\n`),
  });
  const outcomes: CaseOutcome[] = [];
  try {
    for (let run = 1; run <= runs; run++) {
      for (const c of cases) {
        const o = await campaign.run(c);
        outcomes.push(o);
        process.stderr.write(`run ${run}: ${JSON.stringify(o)}\n`);
      }
      // The table so far after each round, so that a campaign cut short still reports.
      process.stdout.write(`\n${run} of ${runs} rounds:\n\n${faultTable(outcomes)}\n`);
    }
  } finally {
    await campaign.close();
  }
}

main().then(
  () => process.exit(0),
  (e) => {
    process.stderr.write(`${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    process.exit(1);
  },
);
