/**
 * The gateway's part of every transition, as activities on the server task queue: only the gateway
 * sees requests start and finish, so the admission window, the drain, the start of the waiters
 * and their failure happen there. The switch workflow calls these; the gateway implements them
 * (an in-memory stand-in does in the lifecycle's tests).
 */
import type { ApiError } from '../domain/catalogue.js';
import type { Demand, InstanceKey, InstanceRef } from '../api/lifecycle.js';
import type { InstanceUpdate } from '../store/instances.js';

export interface DrainOutcome {
  drained: boolean;
  /** Requests still running on the victims when the drain bound ran out (0 when drained). */
  requestsStillRunning: number;
  /**
   * The deployments of the victims a request was cut from before the engine produced any output:
   * they stop, not park.
   */
  cutBeforeOutput: string[];
}

/** Which server took an instant step: the switch sends it on to every other (workflows/everyGateway.ts). */
export interface RanOn {
  /** That server's own task queue; absent from a gateway that names none (the lifecycle's tests). */
  ranOn?: string;
}

export interface GatewaySteps {
  /**
   * Lets the victim instances take new requests for the admission window, counted from `startedAtMs`
   * and not extended by their traffic; ends early once each victim's deployment has gone one window
   * length with no request starting or finishing and none running. Then closes the victims' dispatch:
   * a new request for a deployment with no other open instance is answered 503 "dispatch … is
   * closed", one with another goes there. `windowMs` null: closes at once. Heartbeats. Answers where
   * the drain stands as they close: drained when nothing runs on them then. `onlyOn`: the server
   * whose gateway must do it (run inside a workflow task, on whichever worker took it); any other
   * refuses, non-retryable (`gatewayFailureTypes.notThisServer`), having done nothing.
   */
  closeAdmission(input: {
    switchId: string;
    victims: InstanceKey[];
    startedAtMs: number;
    windowMs: number | null;
    onlyOn?: string;
  }): Promise<DrainOutcome>;

  /** Waits until the victim instances run no request, up to `timeoutMs`. Heartbeats. */
  awaitDrain(input: { switchId: string; victims: InstanceKey[]; timeoutMs: number }): Promise<DrainOutcome>;

  /**
   * The victim instances begin parking or stopping: dispatched to no more. A new request for a
   * deployment with no other open instance waits, and becomes the next switch.
   */
  withdrawVictims(input: { switchId: string; victims: InstanceKey[] }): Promise<RanOn>;

  /** The victim instances serve again (the compensation of a failed drain). */
  reopen(input: { switchId: string; victims: InstanceKey[] }): Promise<RanOn>;

  /** The target is ready: every request waiting for it runs now, up to the running bound. */
  startWaiters(input: {
    switchId: string;
    hostId: string;
    instance: InstanceRef;
  }): Promise<{ started: number } & RanOn>;

  /** Every request waiting for the deployment is answered `error`. */
  failWaiters(input: { switchId: string; deploymentId: string; error: ApiError }): Promise<{ failed: number } & RanOn>;

  /**
   * The host cannot make room for the deployment: models kept loaded (explicit activation, warm) hold
   * the memory it needs. Its waiting requests go to another host that can serve it; with none, they
   * are answered `error` at once (spec: "A model that needs its memory is refused for capacity").
   * The host scheduler calls it; the gateway alone knows the other hosts.
   */
  capacityRefused(input: { hostId: string; deploymentId: string; error: ApiError }): Promise<{ failed: number }>;

  /** Who waits, since when, for every deployment with waiting requests; and when each last saw traffic. */
  snapshot(): Promise<{ demands: Demand[]; lastActivityMs: Record<string, number> }>;
}

/**
 * The admission window and, when it leaves the victims drained with no request cut, the start of
 * their release in the same step: withdrawn from dispatch (as `withdrawVictims`) and their rows
 * (`rows`) saying parking or stopping. A switch whose window runs inside its workflow task then
 * schedules its parks after one local step, not two. The server composes it from the gateway and the
 * store (server/serverActivities.ts). `released` false: nothing was withdrawn or written.
 */
export interface WindowThenRelease {
  closeAdmissionThenRelease(
    input: Parameters<GatewaySteps['closeAdmission']>[0] & { rows: InstanceUpdate[] },
  ): Promise<DrainOutcome & { released: boolean }>;
}
