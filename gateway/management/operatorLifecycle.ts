import type { CommandReceipt, SwitchResult } from '../../api/lifecycle.js';
import type { HostState } from '../../domain/vocabulary.js';
import type { DeploymentSpec } from '../../settings/deploymentDocument.js';
import type { Host, SaveResult } from '../../api/catalogue.js';
import type { CommandArgs, CommandResult, Commands } from '../lifecycleClient.js';
import type { RoutedDeployment } from '../routingTable.js';

/**
 * What the operator's routes ask of the lifecycle. The server implements it over Temporal; a route
 * test can give its own.
 */
export interface OperatorLifecycle {
  /**
   * The hosts whose schedulers decide for the deployment, one per instance it may have
   * (gateway/placement.ts); none when no host may run it.
   */
  placement(deployment: RoutedDeployment): Promise<string[]>;
  command<K extends keyof Commands>(hostId: string, update: K, ...args: CommandArgs<K>): Promise<CommandResult<K>>;
  /** Saves a deployment document; a new revision's checkpoint is measured on the host it would run on. */
  deploy(spec: DeploymentSpec): Promise<SaveResult>;
  /** Marks the host draining (nothing is placed on it any more) and stops what it holds. */
  drainHost(hostId: string): Promise<CommandReceipt[]>;
  /** Ends a drain: models may be placed on the host again. */
  undrainHost(hostId: string): Promise<void>;
  /** How a switch ended; null while it runs, undefined when there is no such switch. */
  switchResult(switchId: string): Promise<SwitchResult | null | undefined>;
  /** How a host stands now (`draining` as the store records it): its state and its last report. */
  hostLiveness(host: Pick<Host, 'id' | 'draining' | 'lastSeenAt'>): { state: HostState; lastSeenAt: Date };
}
