import type { Command } from './command.js';

/**
 * Every command by its words, loaded only when called: a `list` then loads what a list needs, not
 * the server, the YAML reader or the settings schemas (a call's cost is mostly what it loads). The
 * one table the dispatcher, `--help`, "did you mean" and `completion bash` read.
 */
export const commandIndex: ReadonlyArray<{ words: readonly string[]; load: () => Promise<Command> }> = [
  { words: ['deploy', 'model'], load: async () => (await import('./commands/deployModel.js')).deployModel },
  { words: ['start', 'deployment'], load: async () => (await import('./commands/startDeployment.js')).startDeployment },
  {
    words: ['park', 'deployment'],
    load: async () => (await import('./commands/deploymentCommands.js')).parkDeployment,
  },
  {
    words: ['stop', 'deployment'],
    load: async () => (await import('./commands/deploymentCommands.js')).stopDeployment,
  },
  {
    words: ['preinitialize', 'deployment'],
    load: async () => (await import('./commands/deploymentCommands.js')).preinitializeDeployment,
  },
  {
    words: ['delete', 'deployment'],
    load: async () => (await import('./commands/deploymentCommands.js')).deleteDeployment,
  },
  { words: ['list', 'deployments'], load: async () => (await import('./commands/listDeployments.js')).listDeployments },
  {
    words: ['status', 'deployment'],
    load: async () => (await import('./commands/statusDeployment.js')).statusDeployment,
  },
  { words: ['list', 'hosts'], load: async () => (await import('./commands/listHosts.js')).listHosts },
  { words: ['drain', 'host'], load: async () => (await import('./commands/drainHost.js')).drainHost },
  { words: ['undrain', 'host'], load: async () => (await import('./commands/drainHost.js')).undrainHost },
  { words: ['create', 'host-token'], load: async () => (await import('./commands/hostToken.js')).createHostToken },
  { words: ['revoke', 'host-token'], load: async () => (await import('./commands/hostToken.js')).revokeHostToken },
  { words: ['engine', 'list'], load: async () => (await import('./commands/engineList.js')).engineList },
  { words: ['settings', 'check'], load: async () => (await import('./commands/settingsCheck.js')).settingsCheck },
  { words: ['start', 'standalone'], load: async () => (await import('./commands/startStandalone.js')).startStandalone },
  { words: ['start', 'server'], load: async () => (await import('./commands/startServer.js')).startServer },
  { words: ['start', 'host'], load: async () => (await import('./commands/startHost.js')).startHost },
  { words: ['sim'], load: async () => (await import('./commands/sim.js')).sim },
  { words: ['completion', 'bash'], load: async () => (await import('./commands/completion.js')).completionBash },
];

/** Every command, loaded: what `--help` and `completion bash` list. */
export const allCommands = (): Promise<Command[]> => Promise.all(commandIndex.map((entry) => entry.load()));
