/**
 * What the inference route tells about each request, by deployment name; the server's metrics
 * (server/metrics.ts) count it.
 */
export interface RequestMetrics {
  /**
   * The request ended: `status` the HTTP status the client got (0 when none went out), `code` the
   * catalogue's error code when the gateway answered an error, `cut` when the exchange was cut
   * short without one, empty when the engine's answer went out whole.
   */
  answered(deployment: string, status: number, code: string): void;
  /** It left the queue for an engine after `seconds` (0 when it did not wait). */
  waited(deployment: string, seconds: number): void;
  /** Its first output reached the client `seconds` after it arrived. */
  firstOutput(deployment: string, seconds: number): void;
}
