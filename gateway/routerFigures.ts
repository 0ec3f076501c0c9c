/**
 * What the request queue tells the load endpoint (spec, "Reading load" → `router`): requests being
 * forwarded and their bound, requests waiting in CapyCTL and the waiting limit. Read from memory.
 */
export interface RouterFigures {
  /** A deployment's figures; a deployment the queue never saw has all zeros and the limits. */
  deployment(deploymentId: string): { inFlight: number; inFlightLimit: number; waiting: number; waitingLimit: number };
  /** Requests being forwarded to one instance now (`router_in_flight`). */
  instanceInFlight(deploymentId: string, instanceIndex: number): number;
}
