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
