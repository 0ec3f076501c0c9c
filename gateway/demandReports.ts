import type { Demand } from '../api/lifecycle.js';

/**
 * Sends each deployment's demand reports one at a time: sent at once they could arrive out of
 * order, and a stale "1 waiting" after the "0 waiting" would start a model for nobody. A report is
 * a state, not an event, so one superseded while another was on its way is not sent at all: 4,096
 * clients hanging up one by one make a few signals, not 4,096 (each would also be an event in the
 * scheduler's history).
 */
export function latestInOrder(
  send: (demand: Demand) => Promise<unknown>,
  onError: (error: unknown, demand: Demand) => void,
): (demand: Demand) => void {
  /** For each deployment with a report on its way: the newest report that waits for it, if any. */
  const next = new Map<string, Demand | undefined>();
  const sendFrom = (demand: Demand) => {
    next.set(demand.deploymentId, undefined);
    void send(demand)
      .catch((e) => onError(e, demand))
      .then(() => {
        const newer = next.get(demand.deploymentId);
        if (newer) sendFrom(newer);
        else next.delete(demand.deploymentId);
      });
  };
  return (demand) => {
    if (next.has(demand.deploymentId)) next.set(demand.deploymentId, demand);
    else sendFrom(demand);
  };
}
