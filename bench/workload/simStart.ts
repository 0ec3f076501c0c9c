/**
 * What a simulated engine's start costs beyond its `--sim-load-ms`: the Node.js process starting,
 * which a real engine's published cold start already includes. Measured as the host launches it,
 * so the benchmark takes it off the load time and a start costs the profile's cold start.
 */
import { performance } from 'node:perf_hooks';
import { startSimulator } from '../../test/support/simulator.js';

export async function simulatorStartMs(rounds = 3): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < rounds; i++) {
    const started = performance.now();
    const sim = await startSimulator('vllm', ['sim/start', '--sim-load-ms', '1']);
    times.push(performance.now() - started);
    await sim.stop();
  }
  return times.sort((a, b) => a - b)[Math.floor(times.length / 2)]!;
}
