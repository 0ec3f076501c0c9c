/**
 * The KV cache one sequence needs, computed as vLLM computes it (CONTRACTS.md, "Memory an engine
 * really needs", cites each step): a page of `block_size` tokens holds K and V of every KV head of a
 * layer, `2 × block_size × num_kv_heads × head_size × dtype bytes` (`AttentionSpec.real_page_size_bytes`);
 * a sequence of L tokens takes `cdiv(L, block_size)` pages of every layer
 * (`FullAttentionSpec.max_memory_usage_bytes`, summed over the layers). The model's figures come
 * from its config.json, read as vLLM reads them, or from the engine simulator's model description.
 */

/** vLLM's default `--block-size` on CUDA: the tokens of one KV page. */
export const KV_BLOCK_TOKENS = 16;

/** What a model's KV cache is made of, and the longest sequence the model itself takes. */
export interface ModelKv {
  /** K and V of one token over every layer: `2 × layers × kv heads × head size × dtype bytes`. */
  bytesPerToken: number;
  /** The model's own maximum length (vLLM's derived `max_model_len`). */
  maxModelLen: number;
}

/** The KV cache one sequence of `tokens` takes, whole pages of every layer. */
export const kvBytesFor = (bytesPerToken: number, tokens: number): number =>
  Math.ceil(tokens / KV_BLOCK_TOKENS) * KV_BLOCK_TOKENS * bytesPerToken;

/** The longest sequence `bytes` of KV cache holds, whole pages; 0 when not one page (vLLM's `estimate_max_model_len`). */
export const longestSequenceIn = (bytesPerToken: number, bytes: number): number =>
  Math.max(0, Math.floor(bytes / (KV_BLOCK_TOKENS * bytesPerToken)) * KV_BLOCK_TOKENS);

/** Bytes of one element of each `torch_dtype` a config.json names (the KV cache takes the model's dtype). */
const dtypeBytes: Record<string, number> = { float32: 4, float16: 2, bfloat16: 2, float8_e4m3fn: 1 };

/** Where vLLM reads a model's maximum length, the smallest present winning (`_get_and_verify_max_len`). */
const MAX_LENGTH_KEYS = [
  'max_position_embeddings',
  'n_positions',
  'max_seq_len',
  'seq_length',
  'model_max_length',
  'max_target_positions',
  'max_sequence_length',
  'max_seq_length',
  'seq_len',
];

const positive = (v: unknown): number | undefined =>
  typeof v === 'number' && Number.isInteger(v) && v > 0 ? v : undefined;

/**
 * A Hugging Face config.json's KV figures: layers (`num_hidden_layers`), KV heads
 * (`num_key_value_heads`, else `num_attention_heads`), head size (`head_dim`, else
 * `hidden_size / num_attention_heads`), dtype (`torch_dtype`, `dtype`) and maximum length. Undefined
 * when a figure is missing: the model is then served at its engine's own length.
 */
export function modelKvOfConfig(config: Record<string, unknown>): ModelKv | undefined {
  const text = (config.text_config as Record<string, unknown> | undefined) ?? config;
  const layers = positive(text.num_hidden_layers);
  const heads = positive(text.num_attention_heads);
  const kvHeads = positive(text.num_key_value_heads) ?? heads;
  const headSize =
    positive(text.head_dim) ?? (heads && positive(text.hidden_size) ? Number(text.hidden_size) / heads : undefined);
  const dtype = dtypeBytes[String(text.torch_dtype ?? text.dtype ?? config.torch_dtype ?? '')];
  const lengths = MAX_LENGTH_KEYS.map((k) => positive(text[k])).filter((n): n is number => n !== undefined);
  if (!layers || !kvHeads || !headSize || !Number.isInteger(headSize) || !dtype || lengths.length === 0)
    return undefined;
  return { bytesPerToken: 2 * layers * kvHeads * headSize * dtype, maxModelLen: Math.min(...lengths) };
}
