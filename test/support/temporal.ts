/** Temporal in test files: one quiet runtime per process, connections to the harness's dev server. */
import { NativeConnection } from '@temporalio/worker';
import pino from 'pino';
import { inject } from 'vitest';
import { installTemporalRuntime } from '../../logging/temporalRuntime.js';

/** Worker logs at WARN and above, once per test process (a host agent in the same process shares it). */
export function quietTemporalRuntime(): void {
  installTemporalRuntime(pino({ level: 'warn' }));
}

/** A worker connection to the dev server the harness started, with the runtime made quiet first. */
export async function workerConnection(): Promise<NativeConnection> {
  quietTemporalRuntime();
  return NativeConnection.connect({ address: inject('temporalAddress') });
}
