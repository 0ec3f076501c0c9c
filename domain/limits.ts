/** The spec's fixed numbers: not settings, so no document or flag can change them. */

/** Requests running at once per model ("32, fixed"). */
export const RUNNING_PER_MODEL = 32;

/** A load sample older than this is reported with `fresh: false`. */
export const SAMPLE_STALE_AFTER_MS = 3_000;

/** A stale load sample is kept this long, then dropped. */
export const SAMPLE_KEPT_MS = 30_000;

/** A streamed answer whose client reads nothing for this long is ended. */
export const CLIENT_READ_IDLE_MS = 10_000;

/** A streamed answer with a single piece larger than this is ended. */
export const MAX_STREAM_PIECE_BYTES = 64 * 1024;

/** Every 429 tells the client to retry after this many seconds. */
export const RETRY_AFTER_SECONDS = 1;

/** A decision model's wake check passes when every probability is within this of the first answer. */
export const DECISION_PROBABILITY_TOLERANCE = 0.05;

/**
 * A request body nests arrays and objects, a settings document lists and mappings, at most this
 * deep (the body or document itself is level 1). Not the spec's: an OpenAI body nests under ten
 * levels, a tool's JSON schema a few more, settings a few; vLLM and SGLang (FastAPI's json.loads)
 * give up only at Python's recursion limit, about 1,000. Past it a body or document is refused before
 * anything walks or writes it again, which would run out of stack.
 */
export const MAX_NESTING = 64;
