/** How a gateway step fails, as the workflows read it: pure, so workflow code imports it too. */
export const gatewayFailureTypes = {
  /** A step meant for one server's gateway ran on another's worker: nothing was done there. */
  notThisServer: 'not_this_server',
} as const;
