import { defineConfig } from 'vitest/config';
import { LongestFirst } from './test/support/longestFirst.js';

/**
 * Tests that run `capyctl` processes whole (a standalone, a fresh clone, the demo): each is heavy on
 * two cores, so they run after the rest, whose timing bounds are tighter.
 */
const WHOLE_PROCESSES = [
  'test/readme.test.ts',
  'test/demo.test.ts',
  'test/standalone.restart.test.ts',
  'test/cli.operator.test.ts',
  'test/hostShutdown.test.ts',
  'test/serverPorts.test.ts',
  'test/multiHost.e2e.test.ts',
  'test/multiHost.leaveAndJoin.e2e.test.ts',
  'test/recovery.e2e.test.ts',
  'test/twoServers.e2e.test.ts',
  'test/installations.e2e.test.ts',
  'test/documents.sweep.e2e.test.ts',
  'test/metrics.e2e.test.ts',
  'test/faults.e2e.test.ts',
  'test/statusPage.e2e.test.ts',
  'test/workload.e2e.test.ts',
  'test/multiGpu.e2e.test.ts',
];

/**
 * Tests on the Temporal server itself (built from its Go module, on Postgres), not the dev server:
 * they restart it, or run a whole cluster of processes (the README's steps), so they run alone, last.
 * Run beside the whole-process tests once, the README test's standalone never became ready within
 * its 300 s (cause not found).
 */
const REAL_TEMPORAL = ['test/realTemporal.e2e.test.ts', 'test/readmeCluster.e2e.test.ts'];

export default defineConfig({
  test: {
    globalSetup: ['test/support/globalSetup.ts'],
    // The Temporal native bridge is not safe in worker threads.
    pool: 'forks',
    poolOptions: { forks: { maxForks: 2, minForks: 1 } },
    sequence: { sequencer: LongestFirst },
    testTimeout: 60_000,
    hookTimeout: 120_000,
    projects: [
      {
        extends: true,
        test: {
          name: 'in process',
          include: ['test/**/*.test.ts', 'bench/**/*.test.ts'],
          exclude: [...WHOLE_PROCESSES, ...REAL_TEMPORAL],
          sequence: { groupOrder: 0 },
        },
      },
      { extends: true, test: { name: 'whole processes', include: WHOLE_PROCESSES, sequence: { groupOrder: 1 } } },
      { extends: true, test: { name: 'real Temporal', include: REAL_TEMPORAL, sequence: { groupOrder: 2 } } },
    ],
  },
});
