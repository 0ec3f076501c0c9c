/**
 * The workload benchmark's fleets (bench/workload/fleet.ts): what `fixed` keeps on each card and
 * what the lower bound charges, on the two-card fleet and on the 8-GPU box whose models span one,
 * two and four cards.
 */
import { describe, expect, it } from 'vitest';
import { deploymentDocument, fixedAssignment, fleets } from './fleet.js';
import { lowerBoundTtfts } from './lowerBound.js';
import { prefillMs, profiles } from './profiles.js';

const ask = (at_ms: number, model: string) => ({ at_ms, model, prompt_tokens: 512, output_tokens: 64, stream: true });

describe('the workload fleets', () => {
  it('fixed keeps the most popular models that fit, first fit per card, a four-GPU model on four cards', () => {
    expect(fixedAssignment(fleets.two_cards)).toEqual([
      ['m1-8b', 'm2-small'],
      ['m3-8b', 'm4-small'],
    ]);
    // g1 (65 GiB a card) on 0–3, g2 on 4, g3 (20 GiB) on 5, g4 (32.5 GiB a card) on 5 and 6, g6 beside
    // them on 5, g7 on 7; g5 needs four cards with 65 GiB free and finds none.
    expect(fixedAssignment(fleets.eight_gpus)).toEqual([
      ['g1-235b-tp4'],
      ['g1-235b-tp4'],
      ['g1-235b-tp4'],
      ['g1-235b-tp4'],
      ['g2-30b'],
      ['g3-8b', 'g4-30b-tp2', 'g6-8b'],
      ['g4-30b-tp2'],
      ['g7-30b'],
    ]);
  });

  it("a multi-GPU model's deployment says its tensor parallelism as vLLM users write it", () => {
    const [tp4, one] = [fleets.eight_gpus.models[0]!, fleets.eight_gpus.models[1]!];
    const pace = { speed: 1, processStartMs: 0 };
    expect((deploymentDocument(tp4, 'capyctl', pace).extra_args as string[]).slice(-2)).toEqual([
      '--tensor-parallel-size',
      '4',
    ]);
    expect(deploymentDocument(one, 'capyctl', pace).extra_args).not.toContain('--tensor-parallel-size');
  });

  it('the lower bound wakes a four-GPU model once, and evicting it frees all four of its cards', () => {
    const fleet = fleets.eight_gpus;
    const own235 = prefillMs(profiles['235b'], 512);
    const own30 = prefillMs(profiles['30b'], 512);
    const ttfts = lowerBoundTtfts(fleet, [
      ask(0, 'g1-235b-tp4'),
      ask(1, 'g5-235b-tp4'),
      ask(2, 'g1-235b-tp4'),
      // Eight cards hold the two 235B models; a 30B model evicts the least recently used (g5) from
      // one card, and g5 leaves all four, so a second 30B model lands beside it without an eviction.
      ask(3, 'g2-30b'),
      ask(4, 'g7-30b'),
      ask(5, 'g1-235b-tp4'),
      ask(6, 'g5-235b-tp4'),
    ]);
    expect(ttfts).toEqual([
      own235 + profiles['235b'].wakeHostRamMs,
      own235 + profiles['235b'].wakeHostRamMs,
      own235,
      own30 + profiles['30b'].wakeHostRamMs,
      own30 + profiles['30b'].wakeHostRamMs,
      own235,
      own235 + profiles['235b'].wakeHostRamMs,
    ]);
  });
});
