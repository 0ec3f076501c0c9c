/**
 * Which host's scheduler hears of a deployment's waiting requests: the host that already holds an
 * instance of it (parked or ready), else the first registered host it may run on.
 */
import type { RoutedDeployment } from '../gateway/routingTable.js';

export function hostFor(deployment: RoutedDeployment, registeredHosts: readonly string[]): string | undefined {
  const held = deployment.instances.find((i) => i.observedState !== 'stopped' && registeredHosts.includes(i.hostId));
  if (held) return held.hostId;
  const allowed = deployment.spec.hosts;
  return registeredHosts.find((h) => allowed === undefined || allowed.includes(h));
}
