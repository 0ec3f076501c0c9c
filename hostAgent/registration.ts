/**
 * What a host agent tells the server about itself when it registers: its GPUs, its host RAM and the
 * settings the server applies.
 */
import type { RegistrationBody } from '../api/hosts.js';
import type { HostSettings } from '../settings/hostDocument.js';
import type { HostGpu } from '../store/hosts.js';
import { hostRamBytes } from './gpus.js';

export function registrationOf(
  hostId: string,
  settings: Pick<HostSettings, 'host_ram' | 'resource_policy' | 'lifecycle'>,
  gpus: readonly HostGpu[],
  ingressUrl: string,
): RegistrationBody {
  return {
    host_id: hostId,
    gpus: gpus.map((g) => ({ index: g.index, name: g.name, memory_bytes: g.memoryBytes, memory_kind: g.memoryKind })),
    host_ram_bytes: hostRamBytes(settings),
    settings: { queue: settings.resource_policy.queue, activation: settings.lifecycle.activation },
    ingress_url: ingressUrl,
  };
}
