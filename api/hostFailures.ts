/**
 * How a host's steps fail, as the workflows read them: pure, so workflow code imports it too.
 */

/** Failure types the workflows read; EngineError kinds pass through under their own names. */
export const hostFailureTypes = {
  engineExited: 'engine_exited',
  engineBusy: 'engine_busy',
  notRunning: 'engine_not_running',
  /**
   * The engine was launched by an earlier agent of this host, and ended with it: the agent that
   * answers has started since (the switch's waiters wait for the next start, not for its failure).
   */
  lostWithAgent: 'engine_lost_with_agent',
  checkpointMissing: 'checkpoint_missing',
  /** Every port of the host's `engine_ports` is taken: the engine was not launched. */
  enginePortsExhausted: 'engine_ports_exhausted',
  /** A wake begun once its switch's victims released did not finish within the wake window. */
  wakeWindowOver: 'wake_window_over',
} as const;

/** What an engine that exited leaves in its failure's details: how it ended, and its last stderr lines. */
export interface ExitFailureDetails {
  how: string;
  stderr: string[];
}

/** What a park refused for a busy engine leaves in its failure's details. */
export interface EngineBusyDetails {
  requestsStillRunning: number;
}
