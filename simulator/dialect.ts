/** What differs between the engines the simulator speaks for; everything else is shared. */
import type { Router } from './http.js';

export interface Dialect {
  /** `owned_by` in `/v1/models`. */
  readonly ownedBy: string;
  /**
   * vLLM binds its socket only once the engine is built, so a client sees connection refused until
   * then; SGLang and TensorFold listen at once and answer `/health` 503 while loading.
   */
  readonly listensWhileLoading: boolean;
  /** TensorFold sends a stream's assistant-role chunk on arrival, before it looks at the prompt. */
  readonly roleChunkOnArrival: boolean;
  /** What the engine logs once it serves. */
  readonly readyLines: readonly string[];
  /** An error body in the engine's own JSON. */
  errorBody(status: number, message: string): unknown;
  /** Adds the engine's own routes (metrics, park and wake, …) to the shared ones. */
  addRoutes(router: Router): void;
}
