/**
 * The store's functions as ports: those the gateway is given (gateway/ports.ts), and the few more
 * the server's own parts write and read through (a host's heartbeat and drain, a deploy, the list of
 * servers). The one place where the server's parts meet store/; a part's test gives its own.
 */
import type { SaveResult } from '../api/catalogue.js';
import type { Catalogue, GatewayStore, HostRegistry } from '../gateway/ports.js';
import type { Problem } from '../domain/problems.js';
import type { DeploymentSpec } from '../settings/deploymentDocument.js';
import type { Db } from '../store/db.js';
import {
  deleteDeployment,
  findDeployment,
  listDeployments,
  recordMeasureFailure,
  recordProblem,
  saveDeployment,
} from '../store/deployments.js';
import {
  findHost,
  hostForToken,
  ingressSecrets,
  issueHostToken,
  listHosts,
  markHostSeen,
  newIngressSecret,
  registerHost,
  revokeHostToken,
  setHostDraining,
} from '../store/hosts.js';
import { listInstances } from '../store/instances.js';
import { forgetServer, markServerSeen, type ServerRow, takeGoneServers } from '../store/servers.js';
import { listSwitchReceipts } from '../store/switchReceipts.js';

export interface ServerCatalogue extends Catalogue {
  /** Deploys a spec under its name: a new deployment, a new revision, or nothing. */
  save(spec: DeploymentSpec): Promise<SaveResult>;
  /** Clears why a revision's measurement failed: it is measured again. */
  clearMeasureFailure(id: string, revision: number): Promise<void>;
  /** Records a deployment's last problem (an engine a host reported exited). */
  recordProblem(id: string, problem: Problem): Promise<void>;
}

export interface ServerHosts extends HostRegistry {
  /** Each host's ingress secret, by host ID. */
  ingressSecrets(): Promise<Map<string, string>>;
  /** When the host last reported; an older time than the one stored is ignored. */
  markSeen(id: string, at: Date): Promise<void>;
  setDraining(id: string, draining: boolean): Promise<void>;
}

/** The servers that share the store, each with its heartbeat (store/servers.ts). */
export interface ServerList {
  /** True when the row was not there: new, or taken out by a server that found this one gone. */
  markSeen(server: ServerRow): Promise<boolean>;
  /** The servers past the bound, taken out of the list. */
  takeGone(): Promise<ServerRow[]>;
  forget(id: string): Promise<void>;
}

export interface ServerStore extends GatewayStore {
  catalogue: ServerCatalogue;
  hosts: ServerHosts;
  servers: ServerList;
}

export function storePorts(db: Db): ServerStore {
  return {
    catalogue: {
      deployments: () => listDeployments(db),
      deployment: (idOrName) => findDeployment(db, idOrName),
      instances: () => listInstances(db),
      deleteDeployment: (id) => deleteDeployment(db, id),
      save: (spec) => saveDeployment(db, spec),
      clearMeasureFailure: (id, revision) => recordMeasureFailure(db, id, revision, null),
      recordProblem: (id, problem) => recordProblem(db, id, problem),
    },
    hosts: {
      hosts: () => listHosts(db),
      host: (id) => findHost(db, id),
      hostOfToken: (token) => hostForToken(db, token),
      async register(token, host) {
        const ingressSecret = newIngressSecret();
        const outcome = await registerHost(db, token, host, ingressSecret);
        return outcome === 'registered' ? { outcome, ingressSecret } : { outcome };
      },
      issueToken: () => issueHostToken(db),
      revokeToken: (hostId) => revokeHostToken(db, hostId),
      ingressSecrets: () => ingressSecrets(db),
      markSeen: (id, at) => markHostSeen(db, id, at),
      setDraining: (id, draining) => setHostDraining(db, id, draining),
    },
    switchReceipts: { latest: (limit, finishedSince) => listSwitchReceipts(db, { limit, finishedSince }) },
    servers: {
      markSeen: (server) => markServerSeen(db, server),
      takeGone: () => takeGoneServers(db),
      forget: (id) => forgetServer(db, id),
    },
  };
}
