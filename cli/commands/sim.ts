/** `capyctl sim DIALECT [engine args…]`: the engine simulator, a stand-in for vLLM, SGLang or TensorFold. */
import type { Command } from '../command.js';

export const sim: Command = {
  words: ['sim'],
  summary: 'run the engine simulator: speaks vLLM, SGLang or TensorFold over HTTP on a simulated GPU',
  usage:
    'capyctl sim vllm|sglang|tensorfold [engine args…] [--sim-weights SIZE] [--sim-kv SIZE] [--sim-load-ms MS] ' +
    '[--sim-park-ms MS] [--sim-wake-ms MS] [--sim-reload-ms MS] [--sim-prefill-ms MS] [--sim-tokens-per-s N] ' +
    '[--sim-decision A,B,…]\n\n' +
    'Engine args as the real engine takes them: ' +
    'vllm MODEL --port P [--host H] [--enable-sleep-mode] [--max-num-seqs N] [--served-model-name NAME]; ' +
    'sglang --model-path M --port P [--enable-memory-saver] [--enable-weights-cpu-backup] [--enable-metrics] ' +
    '[--max-running-requests N] [--speculative-algorithm X]; tensorfold --model M --port P [--max-running N]. ' +
    'Other flags are accepted and ignored. With CAPYCTL_SIM_GPU_DIR set, the memory comes from the simulated GPU ' +
    'CUDA_VISIBLE_DEVICES names there, shared with every simulator on it.',
  example:
    'VLLM_SERVER_DEV_MODE=1 capyctl sim vllm Qwen/Qwen3-4B --port 8001 ' +
    '--enable-sleep-mode --sim-weights 8GiB --sim-load-ms 500',
  async run(args) {
    // Loaded on use: the other commands do not pay for the simulator.
    const { runSimulator } = await import('../../simulator/server.js');
    return runSimulator(args);
  },
};
