/** The command line every adapter builds the same way, from its engine's contract (contracts.ts). */
import { engineContracts } from './contracts.js';
import type { LaunchContext, LaunchPlan } from './engine.js';
import { findOption } from './launchOptions.js';
import { memoryBoundArgs } from './memoryBound.js';
import { maxRunningToPass } from './rules.js';

/**
 * `[option, length]`: the longest sequence the KV budget holds, in the engine's option; none when
 * the engine chooses, or when the host's command or the extra_args say it already (the same figure:
 * the measurement took it as declared).
 */
function contextLengthArgs({ spec, command, memory }: LaunchContext): string[] {
  const contract = engineContracts[spec.engine].contextLength;
  if (contract === null || memory.maxModelLen == null) return [];
  if (findOption([...command, ...spec.extra_args], contract.option) !== undefined) return [];
  return [contract.option, String(memory.maxModelLen)];
}

/**
 * The host's command, the model, the name it serves, where to listen, the bound on requests run at
 * once when CapyCTL passes one, its GPU memory bound, the engine's own options and those parking needs, then the
 * deployment's extra_args last so that they win. The engine serves the model under the deployment's
 * name, the name clients ask for, so requests and answers pass through unchanged.
 */
export function buildLaunchPlan(ctx: LaunchContext): LaunchPlan {
  const { spec, command, port, gpuIndexes, parkTier, memory } = ctx;
  const contract = engineContracts[spec.engine];
  const maxRunning = maxRunningToPass({ spec, command });
  const bound = maxRunning === undefined ? [] : [contract.maxRunning.option, String(maxRunning)];
  const parks = parkTier !== null;
  return {
    // 127.0.0.1 only: the host's ingress is the way in, and the control routes must not be reachable.
    argv: [
      ...command,
      ...contract.modelArgs(spec.model),
      '--served-model-name',
      spec.name,
      '--port',
      String(port),
      '--host',
      '127.0.0.1',
      ...bound,
      ...memoryBoundArgs(spec, command, memory),
      ...contextLengthArgs(ctx),
      ...contract.alwaysFlags,
      ...(parks ? contract.parkFlags(parkTier) : []),
      ...spec.extra_args,
    ],
    env: { CUDA_VISIBLE_DEVICES: gpuIndexes.join(','), ...(parks ? contract.parkEnv : {}) },
  };
}
