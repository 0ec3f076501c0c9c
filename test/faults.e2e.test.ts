/**
 * The fault campaign's short form (issue 18): a server, two host agents and a Temporal dev server,
 * each its own process, one of them killed outright (SIGKILL) at a phase of a switch and started
 * again. No client is left without an answer, every answer is a 200 or an error of the spec's
 * table (bar the requests the killed process held), every model is served for its next request,
 * no deployment stays in an in-between state, and no GPU memory is held by an engine no instance
 * accounts for. bench/faultCampaign.ts runs every case ten times.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CaseOutcome, type FaultCase, FaultCampaign, faultTable } from './support/faultCampaign.js';
import { harnessServices } from './support/lifecycle.js';

/**
 * The most telling case of each process, within the suite's time, and the host killed while a wake
 * scheduled beside the victim's stop runs on it (a restarted agent has lost what the stop said).
 */
const CASES: FaultCase[] = [
  { kill: 'server', phase: 'park' },
  { kill: 'host', phase: 'start' },
  { kill: 'host', phase: 'wake' },
  { kill: 'temporal', phase: 'drain' },
];

describe('the fault campaign, one kill per case', () => {
  let campaign: FaultCampaign;
  const outcomes: CaseOutcome[] = [];

  beforeAll(async () => {
    campaign = await FaultCampaign.start({
      postgresAdminUrl: (await harnessServices()).postgresAdminUrl,
      requestDeadlineMs: 60_000,
      settleMs: 20_000,
    });
  }, 180_000);

  afterAll(async () => {
    if (outcomes.length > 0) console.log(faultTable(outcomes));
    await campaign?.close();
  });

  for (const c of CASES) {
    it(
      `${c.kill} killed during the ${c.phase}: nothing lost, nothing stuck, no GPU memory held by no instance`,
      { timeout: 150_000 },
      async () => {
        const o = await campaign.run(c);
        outcomes.push(o);
        // The answers that were not a 200, for the failure's message.
        const seen = o.details.join('\n');
        // The kill landed in the phase the case names (read from the switch's history up to the kill).
        expect(o.hit, seen).toBe(c.phase);
        expect({ lost: o.counts.lost, unexpected: o.counts.unexpected }, seen).toEqual({ lost: 0, unexpected: 0 });
        expect(o.servedAfter, seen).toBe(true);
        expect(o.stuck).toEqual([]);
        expect(o.leakedGpuBytes).toBe(0);
      },
    );
  }
});
