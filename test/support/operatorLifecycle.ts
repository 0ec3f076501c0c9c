/**
 * An operator lifecycle for route tests: deploys into the store and the table as the server does,
 * records what the routes ask, and answers commands with canned receipts.
 */
import { instanceCount } from '../../engines/rules.js';
import type { CommandArgs, Commands } from '../../gateway/lifecycleClient.js';
import type { OperatorLifecycle } from '../../gateway/management/operatorLifecycle.js';
import type { RoutingTable } from '../../gateway/routingTable.js';
import { heldOn, mayRunOn } from '../../gateway/placement.js';
import type { Db } from '../../store/db.js';
import { saveDeployment } from '../../store/deployments.js';
import type { CommandReceipt, SwitchResult } from '../../api/lifecycle.js';

export interface RecordingLifecycle extends OperatorLifecycle {
  /** Each command as `hostId update args`, and each deploy as `deploy name outcome revision`. */
  calls: string[];
  /** What the next command answers (or throws); by default a receipt in state `ready`. */
  next?: (update: keyof Commands, args: unknown[]) => CommandReceipt | CommandReceipt[];
  /** The switches `switchResult` knows: a result, or null while one runs. */
  switches: Map<string, SwitchResult | null>;
}

export function recordingLifecycle(
  db: Db,
  table: RoutingTable,
  hosts: readonly string[] = ['gpu-box'],
): RecordingLifecycle {
  const calls: string[] = [];
  const lifecycle: RecordingLifecycle = {
    calls,
    switches: new Map(),
    placement: async (d) => {
      const held = heldOn(d, hosts);
      const free = hosts.filter((h) => mayRunOn(d, h) && !held.includes(h));
      return [...held, ...free].slice(0, instanceCount(d.spec));
    },
    async command<K extends keyof Commands>(hostId: string, update: K, ...args: CommandArgs<K>) {
      calls.push(`${hostId} ${update} ${JSON.stringify(args)}`);
      const answer = lifecycle.next?.(update, args) ?? {
        deploymentId: (args[0] as { deploymentId: string }).deploymentId,
        victims: [],
        state: 'ready',
      };
      // The routes only read what they sent for: the mapped result type is not worth restating here.
      return answer as never;
    },
    async deploy(spec) {
      const saved = await saveDeployment(db, spec);
      table.putDeployment(saved.deployment);
      calls.push(`deploy ${spec.name} ${saved.outcome} ${saved.deployment.revision}`);
      return saved;
    },
    async drainHost(hostId) {
      calls.push(`${hostId} drainHost`);
      return [];
    },
    async undrainHost(hostId) {
      calls.push(`${hostId} undrainHost`);
    },
    async switchResult(switchId) {
      return lifecycle.switches.get(switchId);
    },
    hostLiveness: (host) => ({ state: host.draining ? 'draining' : 'ready', lastSeenAt: host.lastSeenAt }),
  };
  return lifecycle;
}
