/**
 * The order test files start in: the longest first, so two forks finish together instead of one
 * running the last long file alone. Vitest orders by the durations of the last run it remembers; a
 * fresh clone (CI) has none, and by file size the fault campaign and the workload benchmark, small
 * files that run for a minute or more each, started last, one fork running them alone.
 */
import { relative } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * Seconds each file took in CI on 2026-12-04 (two cores; files added since, from a whole local run
 * on 2026-12-06); files under 10 s keep vitest's order after these.
 */
export const ciSeconds: Record<string, number> = {
  'test/lifecycle.switch.test.ts': 108,
  'test/readme.test.ts': 83,
  'test/multiHost.leaveAndJoin.e2e.test.ts': 82,
  'test/recovery.e2e.test.ts': 81,
  'test/faults.e2e.test.ts': 80,
  'test/switching.e2e.test.ts': 76,
  'test/multiHost.e2e.test.ts': 74,
  'test/standalone.restart.test.ts': 65,
  'test/cli.operator.test.ts': 58,
  'test/workload.e2e.test.ts': 56,
  'test/commands.e2e.test.ts': 55,
  'test/twoServers.e2e.test.ts': 52,
  'test/gateway.errors.e2e.test.ts': 52,
  'test/lifecycle.scheduler.timers.test.ts': 42,
  'test/realTemporal.e2e.test.ts': 38,
  'test/demo.test.ts': 38,
  'test/serverPorts.test.ts': 36,
  'test/lifecycle.scheduler.test.ts': 36,
  'test/installations.e2e.test.ts': 35,
  'test/multiGpu.e2e.test.ts': 32,
  'test/fuzz.api.test.ts': 30,
  'test/server.test.ts': 29,
  'test/engineVersions.e2e.test.ts': 28,
  'test/hostShutdown.test.ts': 28,
  'test/engineMemory.e2e.test.ts': 25,
  'test/engines.adapters.test.ts': 24,
  'test/inference.test.ts': 20,
  'test/statusPage.e2e.test.ts': 16,
  'test/hostAgent.test.ts': 15,
  'test/standalone.load.test.ts': 15,
  'test/documents.sweep.e2e.test.ts': 15,
  'test/lifecycle.scheduler.beside.test.ts': 14,
  'test/overload.e2e.test.ts': 13,
  'test/lifecycle.scheduler.room.test.ts': 13,
  'test/metrics.e2e.test.ts': 13,
  'test/temporalHarness.test.ts': 12,
  'test/hostTokens.e2e.test.ts': 12,
  'test/hostIngress.e2e.test.ts': 12,
  'test/simulator.gpu.test.ts': 10,
  'test/schedulerTerminated.e2e.test.ts': 10,
  'test/cli.settings.test.ts': 10,
};

const secondsOf = (spec: TestSpecification) => ciSeconds[relative(spec.project.config.root, spec.moduleId)] ?? 0;

export class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    return (await super.sort(files)).sort((a, b) => secondsOf(b) - secondsOf(a));
  }
}
