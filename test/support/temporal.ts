/** Temporal in test files: quiet workers, connections to the harness's dev server. */
import { DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import { inject } from 'vitest';

let installed = false;

/** Worker logs at WARN and above, once per test process. */
export function quietTemporalRuntime(): void {
  if (installed) return;
  Runtime.install({ logger: new DefaultLogger('WARN') });
  installed = true;
}

/** A worker connection to the dev server the harness started, with the runtime made quiet first. */
export async function workerConnection(): Promise<NativeConnection> {
  quietTemporalRuntime();
  return NativeConnection.connect({ address: inject('temporalAddress') });
}
