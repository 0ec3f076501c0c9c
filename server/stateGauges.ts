/**
 * Where the server's deployments and hosts stand now, as gauges read at each scrape: each
 * deployment's state as `capyctl list deployments` shows it, and whether each host reports.
 */
import { Gauge, type Registry } from 'prom-client';
import { instanceStates } from '../domain/vocabulary.js';
import { deploymentState } from '../gateway/routingTable.js';
import type { RoutingTable } from '../gateway/routingTable.js';

/** A host the server knows, and whether it reports: any state `capyctl list hosts` shows but `down`. */
export interface HostReporting {
  host: string;
  up: boolean;
}

/**
 * `capyctl_deployment_state`: a series for each deployment and each state, 1 for the one it is in
 * and 0 for the others, so a state that was never reached still reads 0 rather than nothing.
 */
export function deploymentStateGauge(registry: Registry, table: RoutingTable): void {
  new Gauge({
    name: 'capyctl_deployment_state',
    help: 'Each deployment’s state as capyctl list deployments shows it: 1 for its state now, 0 for the others.',
    labelNames: ['deployment', 'state'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const d of table.list()) {
        const now = deploymentState(d.instances);
        for (const state of instanceStates.options) this.set({ deployment: d.name, state }, state === now ? 1 : 0);
      }
    },
  });
}

/** `capyctl_host_up`: 1 for each host that reports, 0 once it is found down. */
export function hostUpGauge(registry: Registry, read: () => HostReporting[]): void {
  new Gauge({
    name: 'capyctl_host_up',
    help: 'Whether each known host reports to the server: 1, or 0 once it is found down (hosts.down_after).',
    labelNames: ['host'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const h of read()) this.set({ host: h.host }, h.up ? 1 : 0);
    },
  });
}
