/**
 * What each engine can do, as plain facts. The capability rules, the adapters and
 * `capyctl engine list` all read them here, so the three never disagree. What the contract table
 * already says (the tiers it has park steps for, its max-running option) is read from it, not
 * written again.
 */
import type { EngineName, ParkTier } from '../domain/vocabulary.js';
import { engineContracts } from './contracts.js';
import type { EngineAdapter } from './engine.js';

export interface EngineTraits {
  /** The tiers it can park at; empty when it cannot park and stops instead. */
  parkTiers: readonly ParkTier[];
  /**
   * CapyCTL's default of requests run at once, passed at launch when nothing else sets it; undefined
   * when CapyCTL passes nothing and the engine chooses at start.
   */
  defaultMaxRunning: number | undefined;
  /**
   * True when the tier is fixed when the engine starts rather than chosen at each park: SGLang copies
   * released weights to host RAM only when launched with `--enable-weights-cpu-backup`.
   */
  tierFixedAtLaunch: boolean;
}

/** The tiers an engine parks at: those its contract has park steps for. */
const parkTiersOf = (engine: EngineName): ParkTier[] => Object.keys(engineContracts[engine].park) as ParkTier[];

export const engineTraits: Readonly<Record<EngineName, EngineTraits>> = {
  // vLLM's own default (256, or 1024 on large cards) is far above the 32 a model runs at once here.
  vllm: { parkTiers: parkTiersOf('vllm'), defaultMaxRunning: 32, tierFixedAtLaunch: false },
  // SGLang sizes its batch from the memory left after the weights; it reports the figure it chose.
  sglang: { parkTiers: parkTiersOf('sglang'), defaultMaxRunning: undefined, tierFixedAtLaunch: true },
  tensorfold: { parkTiers: parkTiersOf('tensorfold'), defaultMaxRunning: 8, tierFixedAtLaunch: false },
};

/** The adapter's fields that are facts, not behaviour. */
export function adapterFacts(
  name: EngineName,
): Pick<EngineAdapter, 'name' | 'canPark' | 'parkTiers' | 'defaultMaxRunning'> {
  const { parkTiers, defaultMaxRunning } = engineTraits[name];
  return { name, canPark: parkTiers.length > 0, parkTiers, defaultMaxRunning };
}
