/** The command line every adapter builds the same way; each engine adds its model and parking options. */
import type { LaunchContext, LaunchPlan } from './engine.js';
import { maxRunningToPass } from './rules.js';
import { engineTraits } from './traits.js';

export interface EngineArgs {
  /** How the engine is told its checkpoint: `['M']`, `['--model-path', 'M']`. */
  model: string[];
  /** The options parking needs, and any the engine always gets. */
  options: string[];
  env?: Record<string, string>;
}

/**
 * The host's command, the model, the name it serves, where to listen, the bound on requests run at
 * once when CapyCTL passes one, the engine's options, then the deployment's extra_args last so that
 * they win. The engine serves the model under the deployment's name, the name clients ask for, so
 * requests and answers pass through unchanged.
 */
export function buildLaunchPlan(ctx: LaunchContext, args: EngineArgs): LaunchPlan {
  const { spec, command, port, gpuIndex } = ctx;
  const maxRunning = maxRunningToPass({ spec, command });
  const bound = maxRunning === undefined ? [] : [engineTraits[spec.engine].maxRunningOption, String(maxRunning)];
  return {
    // 127.0.0.1 only: the host's ingress is the way in, and the control routes must not be reachable.
    argv: [
      ...command,
      ...args.model,
      '--served-model-name',
      spec.name,
      '--port',
      String(port),
      '--host',
      '127.0.0.1',
      ...bound,
      ...args.options,
      ...spec.extra_args,
    ],
    env: { CUDA_VISIBLE_DEVICES: String(gpuIndex), ...args.env },
  };
}
