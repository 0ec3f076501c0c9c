/**
 * Names shared by every Temporal client and worker: task queues, workflow IDs and the search
 * attributes the Web UI filters switches by. Pure: workflow code imports it too.
 */
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

export const taskQueues = {
  /** The server's workflows and the gateway's activities. */
  server: 'capyctl-server',
  /** A host agent's engine activities. */
  host: (hostId: string) => `host-${hostId}`,
} as const;

export const workflowIds = {
  hostScheduler: (hostId: string) => `host-scheduler/${hostId}`,
  switch: (switchId: string) => `switch/${switchId}`,
  measure: (deploymentId: string, revision: number) => `measure/${deploymentId}/${revision}`,
} as const;

/** On every switch, so a person can list "every switch that parked chat-a" in the Web UI. */
export const searchAttributes = {
  target: defineSearchAttributeKey('CapyTarget', SearchAttributeType.KEYWORD),
  victims: defineSearchAttributeKey('CapyVictims', SearchAttributeType.KEYWORD_LIST),
  host: defineSearchAttributeKey('CapyHost', SearchAttributeType.KEYWORD),
  outcome: defineSearchAttributeKey('CapyOutcome', SearchAttributeType.KEYWORD),
} as const;
