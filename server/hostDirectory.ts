/**
 * Which hosts serve: each host the store records, with its queue settings and where its ingress
 * takes the requests for its engines; which an operator drained; which report (`HostLiveness`);
 * and which another installation schedules (`SchedulerOwnership`'s refusals). Only a host that
 * serves is routed and placed on, and sets the waiting limits. Watched from the end of the server's
 * start (each host has the whole bound to report again) until the beginning of its stop: a host
 * that cannot reach a stopping server is not taken for down.
 */
import type { Logger } from 'pino';
import type { Host } from '../api/catalogue.js';
import { INGRESS_SECRET_HEADER } from '../domain/hostIngress.js';
import type { SchedulerOwnership } from '../gateway/schedulerOwnership.js';
import {
  type QueueSettings,
  queueSettings,
  REQUEST_DEADLINE_DEFAULT_MS,
  type SharedQueueLimits,
  tightestOfHosts,
} from '../settings/queue.js';
import { HostLiveness } from './hostLiveness.js';
import type { ServerHosts } from './storePorts.js';

/** A host's queue settings before it has told them: the host document's defaults. */
const HOST_QUEUE_DEFAULTS: QueueSettings = queueSettings(REQUEST_DEADLINE_DEFAULT_MS.server).parse({});

/** Where a host's ingress takes the requests for its engines, and the secret it takes them with. */
export interface HostIngress {
  url: string;
  headers: Record<string, string>;
}

export interface HostDirectoryDeps {
  hosts: Pick<ServerHosts, 'hosts' | 'host' | 'ingressSecrets' | 'markSeen'>;
  ownership: Pick<SchedulerOwnership, 'refusal'>;
  downAfterMs: number;
  /** A host found down: the engines it held are gone. */
  onDown: (hostId: string) => Promise<void>;
  logger: Logger;
}

export class HostDirectory {
  /** Hosts that report, and whose agent is not stopping. */
  readonly liveness: HostLiveness;
  /** Each host's own queue settings: the waiting limits are the tightest of them, the window its own. */
  private readonly queues = new Map<string, QueueSettings>();
  private readonly ingress = new Map<string, HostIngress>();
  /** Hosts an operator drained: nothing is placed on them any more. */
  private readonly draining = new Set<string>();

  constructor(private readonly deps: HostDirectoryDeps) {
    this.liveness = new HostLiveness({
      downAfterMs: deps.downAfterMs,
      onDown: deps.onDown,
      persistSeen: (hostId, at) => deps.hosts.markSeen(hostId, at),
      storedSeen: async (hostId) => (await deps.hosts.host(hostId))?.lastSeenAt,
      logger: deps.logger,
    });
  }

  /** The hosts the store records as the server starts. */
  async load(): Promise<void> {
    const secrets = await this.deps.hosts.ingressSecrets();
    for (const host of await this.deps.hosts.hosts()) this.know(host, secrets.get(host.id));
  }

  /** A host as the store records it (registered with this server's previous run, or with another server). */
  know(host: Host, secret: string | undefined): void {
    this.queues.set(host.id, (host.settings.queue as QueueSettings | undefined) ?? HOST_QUEUE_DEFAULTS);
    if (typeof host.settings.ingress_url === 'string' && secret !== undefined)
      this.ingress.set(host.id, ingressOf(host.settings.ingress_url, secret));
    if (host.draining) this.draining.add(host.id);
  }

  /** A host registered with this server: its queue settings and ingress as it sent them. */
  registered(hostId: string, queue: unknown, ingressUrl: string, ingressSecret: string): void {
    this.queues.set(hostId, (queue as QueueSettings | undefined) ?? HOST_QUEUE_DEFAULTS);
    this.ingress.set(hostId, ingressOf(ingressUrl, ingressSecret));
  }

  /** Every host known, serving or not. */
  ids(): string[] {
    return [...this.queues.keys()];
  }

  has(hostId: string): boolean {
    return this.queues.has(hostId);
  }

  /** The host's queue settings as it last registered; the defaults for a host not known. */
  queueOf(hostId: string | undefined): QueueSettings {
    return (hostId !== undefined && this.queues.get(hostId)) || HOST_QUEUE_DEFAULTS;
  }

  ingressOf(hostId: string): HostIngress | undefined {
    return this.ingress.get(hostId);
  }

  setDraining(hostId: string, draining: boolean): void {
    if (draining) this.draining.add(hostId);
    else this.draining.delete(hostId);
  }

  /** A host served is one that reports, whose agent is not stopping and whose scheduler is this installation's. */
  serves(hostId: string): boolean {
    return this.liveness.serves(hostId) && !this.deps.ownership.refusal(hostId);
  }

  /** The hosts a model may be placed on: served, and not drained. */
  placeable(): string[] {
    return this.ids().filter((h) => !this.draining.has(h) && this.serves(h));
  }

  /** Only the hosts that serve set them: one that stopped or went down no longer does, until it registers again. */
  limits(): SharedQueueLimits {
    return tightestOfHosts(
      [...this.queues].filter(([hostId]) => this.serves(hostId)).map(([, q]) => q),
      HOST_QUEUE_DEFAULTS,
    );
  }

  /** Each host known now has the whole bound to report again. */
  start(): void {
    this.liveness.watch(this.ids());
  }

  async stop(): Promise<void> {
    await this.liveness.stop();
  }
}

const ingressOf = (url: string, secret: string): HostIngress => ({ url, headers: { [INGRESS_SECRET_HEADER]: secret } });
