/**
 * `capyctl_build_info`: which capyctl a process runs, as labels on a constant 1 (the pattern of
 * Prometheus's own `prometheus_build_info`), so a dashboard can join any series to its version.
 */
import { Gauge, type Registry } from 'prom-client';
import type { BuildInfo } from '../processes/build.js';

/** The commit label of code that is no git checkout of its own (a copy in an image). */
const UNKNOWN_COMMIT = 'unknown';

export function buildInfoGauge(registry: Registry, build: BuildInfo): void {
  new Gauge({
    name: 'capyctl_build_info',
    help: 'Which capyctl this process runs: its version, its git commit, and the Node.js it runs on; always 1.',
    labelNames: ['version', 'commit', 'node_version'] as const,
    registers: [registry],
  }).set({ version: build.version, commit: build.commit ?? UNKNOWN_COMMIT, node_version: process.versions.node }, 1);
}
