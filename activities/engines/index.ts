/** Every engine's adapter, by the name a deployment gives (`engine: vllm`). */
import type { EngineName } from '../../domain/vocabulary.js';
import type { EngineAdapter } from '../../engines/engine.js';
import { sglang } from './sglang.js';
import { tensorfold } from './tensorfold.js';
import { vllm } from './vllm.js';

export const adapters: Readonly<Record<EngineName, EngineAdapter>> = { vllm, sglang, tensorfold };
