/**
 * What the gateway reads and writes of the store, as ports it is given: the routing table's load,
 * the placement rule's weighing and the management routes see these, never SQL. The server wires
 * them from store/ (server/storePorts.ts). A request for a model that serves reaches none of them:
 * it is routed from memory (the routing table, the request queue, the host directory).
 */
import type { Deployment, Host, Instance, Registration, RegistrationOutcome, SwitchReceipt } from '../api/catalogue.js';

/** The catalogue's deployments (each at its current revision) and its mirror of what each instance holds. */
export interface CatalogueReads {
  deployments(): Promise<Deployment[]>;
  /** By its ID or its name. */
  deployment(idOrName: string): Promise<Deployment | undefined>;
  instances(): Promise<Instance[]>;
}

/** The catalogue as the operator's routes change it; a deploy goes through the lifecycle. */
export interface Catalogue extends CatalogueReads {
  /** Removes a deployment with its revisions, instances and wake references; false when there was none. */
  deleteDeployment(id: string): Promise<boolean>;
}

/** The registered hosts. */
export interface HostReads {
  hosts(): Promise<Host[]>;
  host(id: string): Promise<Host | undefined>;
}

/** What a registration gives a host that registered: a new secret for its ingress. */
export type Registered =
  { outcome: 'registered'; ingressSecret: string } | { outcome: Exclude<RegistrationOutcome, 'registered'> };

/** The hosts and the tokens they register with. */
export interface HostRegistry extends HostReads {
  /** The host a token is bound to; undefined for an unknown token or one no host registered with yet. */
  hostOfToken(token: string): Promise<string | undefined>;
  /** Registers (or re-registers) a host, with a new ingress secret in the same write. */
  register(token: string, host: Registration): Promise<Registered>;
  /** A new host token, shown once: only its hash is kept. */
  issueToken(): Promise<string>;
  /** Revokes the token the host registered with; how many it revoked. */
  revokeToken(hostId: string): Promise<number>;
}

/** The switches' receipts. */
export interface SwitchReceipts {
  /** The newest first; with `finishedSince`, only those that finished then or later. */
  latest(limit: number, finishedSince?: Date): Promise<SwitchReceipt[]>;
}

/** What the routing table loads and placement weighs: reads only. */
export interface StoreReads {
  catalogue: CatalogueReads;
  hosts: HostReads;
}

/** Every port the management listener is given. */
export interface GatewayStore extends StoreReads {
  catalogue: Catalogue;
  hosts: HostRegistry;
  switchReceipts: SwitchReceipts;
}
