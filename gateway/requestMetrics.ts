/**
 * What the inference route tells about each request, by deployment name; the server's metrics
 * (server/metrics.ts) count it.
 */
import type { ErrorCode } from '../domain/catalogue.js';

/**
 * How a request ended, besides its HTTP status: the catalogue's code of the error the gateway
 * answered, `cut` when the exchange was cut short without one, `none` when the engine's answer went
 * out whole. Never empty: Prometheus reads an empty label value as the label's absence.
 */
export type RequestEnd = ErrorCode | 'cut' | 'none';

/**
 * The deployment a request is counted under when it was refused before it was routed to one (no
 * token, a body too large or malformed, a model no deployment serves). A model's name is the
 * client's text, not a label value; no deployment can be named this (names are DNS labels).
 */
export const UNROUTED = '(unrouted)';

export interface RequestMetrics {
  /** The request ended: `status` the HTTP status the client got (0 when none went out). */
  answered(deployment: string, status: number, end: RequestEnd): void;
  /** It left the queue for an engine after `seconds` (0 when it did not wait). */
  waited(deployment: string, seconds: number): void;
  /** Its first output reached the client `seconds` after it arrived. */
  firstOutput(deployment: string, seconds: number): void;
}
