/**
 * How often a waiting activity heartbeats, and how long Temporal waits for a beat before it takes the
 * worker for gone: the activities beat, the workflows set the timeout, so both read it here (pure, so
 * workflow code imports it too). Temporal's cancellation rides on the beats.
 */
export const HEARTBEAT_EVERY_MS = 1_000;
/** Five missed beats: the step is given to another worker. */
export const HEARTBEAT_TIMEOUT_MS = 5 * HEARTBEAT_EVERY_MS;
