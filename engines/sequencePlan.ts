/**
 * The longest sequence an engine is launched to serve, and the KV budget the ledger reserves for it
 * (CONTRACTS.md, "Memory an engine really needs"). vLLM refuses to start when its KV cache cannot
 * hold one sequence of its `--max-model-len`, which defaults to the model's own maximum; so capyctl
 * passes a length its reservation holds:
 *
 * - a declared length (the deployment's `max_model_len`, or the option in its extra_args or the
 *   host's command), the KV budget grown to hold it;
 * - else the model's own maximum when the budget holds it;
 * - else the longest the budget holds (a quarter of the weights for a real checkpoint).
 *
 * Without the model's KV figures capyctl passes only a declared length, and the engine chooses.
 * One page per rank is left spare, so the share the engine multiplies back never leaves it a page short.
 */
import type { DeploymentSpec } from '../settings/deploymentDocument.js';
import type { MaxModelLenSource } from '../domain/vocabulary.js';
import { gibibytes } from '../settings/units.js';
import { engineContracts } from './contracts.js';
import { KV_BLOCK_TOKENS, kvBytesFor, longestSequenceIn, type ModelKv } from './kvCache.js';
import { findCount, findOption } from './launchOptions.js';
import { parallelLayout } from './parallelism.js';

/** The longest sequence the engine is launched for; null when capyctl passes none and the engine chooses. */
export interface SequencePlan {
  maxModelLen: number | null;
  maxModelLenFrom: MaxModelLenSource;
}

/**
 * The length declared for the engine: the deployment's `max_model_len`, or its engine's option in
 * the host's command or the extra_args (both may not be set: which one the engine sees would depend
 * on their order). Throws for an engine that takes none.
 */
function declaredLength(spec: DeploymentSpec, command: readonly string[]): number | undefined {
  const contract = engineContracts[spec.engine].contextLength;
  if (contract === null) {
    if (spec.max_model_len !== undefined)
      throw new Error(`max_model_len: ${engineContracts[spec.engine].label} takes no maximum sequence length`);
    return undefined;
  }
  const args = [...command, ...spec.extra_args];
  const raw = findOption(args, contract.option);
  if (raw === undefined) return spec.max_model_len;
  if (spec.max_model_len !== undefined)
    throw new Error(`max_model_len ${spec.max_model_len} and ${contract.option} ${raw} are both set: set one`);
  const n = findCount(args, contract.option);
  if (n === undefined) throw new Error(`${contract.option} ${raw}: expected a whole number of tokens`);
  return n;
}

/**
 * Why the length a document declares cannot be taken, before any host reads the model: an engine
 * that takes none, or both `max_model_len` and the option in its extra_args. Undefined when it can.
 */
export function declaredLengthRefusal(spec: DeploymentSpec): string | undefined {
  try {
    declaredLength(spec, []);
    return undefined;
  } catch (e) {
    return `deployment ${spec.name}: ${(e as Error).message}`;
  }
}

export function planSequence(input: {
  spec: DeploymentSpec;
  command: readonly string[];
  modelKv: ModelKv | undefined;
  /** The KV budget reserved so far, all ranks together. */
  kvBytes: number;
  /** The budget is what the deployment's own memory bound leaves: it cannot grow. */
  fixedKv: boolean;
}): SequencePlan & { kvBytes: number } {
  const { spec, modelKv, kvBytes } = input;
  const declared = declaredLength(spec, input.command);
  if (modelKv === undefined)
    return declared === undefined
      ? { maxModelLen: null, maxModelLenFrom: 'engine_default', kvBytes }
      : { maxModelLen: declared, maxModelLenFrom: 'declared', kvBytes };
  const { ranks, modelShards } = parallelLayout(spec.engine, spec.extra_args);
  // Each rank holds its shard of every token's K and V; each data-parallel group its own sequences.
  const perRank = Math.ceil(modelKv.bytesPerToken / modelShards);
  const page = KV_BLOCK_TOKENS * perRank;
  const needs = (tokens: number) => (kvBytesFor(perRank, tokens) + page) * ranks;
  if (declared !== undefined) {
    if (declared > modelKv.maxModelLen)
      throw new Error(`max_model_len ${declared} is more than the model's own maximum (${modelKv.maxModelLen})`);
    if (input.fixedKv && needs(declared) > kvBytes)
      throw new Error(
        `max_model_len ${declared} needs ${gibibytes(needs(declared))} GiB of KV cache, more than the ` +
          `${gibibytes(kvBytes)} GiB its memory bound leaves`,
      );
    return { maxModelLen: declared, maxModelLenFrom: 'declared', kvBytes: Math.max(kvBytes, needs(declared)) };
  }
  if (needs(modelKv.maxModelLen) <= kvBytes)
    return { maxModelLen: modelKv.maxModelLen, maxModelLenFrom: 'model', kvBytes };
  const longest = longestSequenceIn(perRank, Math.floor(kvBytes / ranks) - page);
  if (longest === 0)
    throw new Error(
      `its KV budget of ${gibibytes(kvBytes)} GiB holds not one sequence of ${KV_BLOCK_TOKENS} tokens ` +
        `(${modelKv.bytesPerToken} bytes a token): declare max_model_len, or a larger memory bound`,
    );
  return { maxModelLen: longest, maxModelLenFrom: 'kv_budget', kvBytes };
}
