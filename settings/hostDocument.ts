/** host.yaml (`capyctl start host`), and the `host:` section of a standalone document. */
import { z } from 'zod';
import { activations, memoryKinds } from '../domain/vocabulary.js';
import { address, bytes, label } from './fields.js';
import { queueSettings, REQUEST_DEADLINE_DEFAULT_MS } from './queue.js';
import { temporalSettings } from './temporal.js';

const GiB = 2 ** 30;

/** A GPU declared in the document; used when the machine has no `nvidia-smi` (simulated devices). */
const declaredGpu = z.strictObject({
  memory: bytes(GiB / 4, 4_096 * GiB),
  memory_kind: memoryKinds.default('discrete'),
});

/** What a host says about itself, in a host document and in a standalone's `host:` section alike. */
export const hostSection = (requestDeadlineDefaultMs: number) =>
  z.strictObject({
    id: label.optional(),
    resource_policy: z.strictObject({ queue: queueSettings(requestDeadlineDefaultMs).prefault({}) }).prefault({}),
    lifecycle: z.strictObject({ activation: activations.default('on_demand') }).prefault({}),
    gpus: z.array(declaredGpu).default([]),
    host_ram: bytes(GiB / 4, 65_536 * GiB).optional(),
  });

export const hostDocument = hostSection(REQUEST_DEADLINE_DEFAULT_MS.server).extend({
  server: z
    .strictObject({
      url: z.url().default('http://127.0.0.1:7443'),
      token: z.string().min(1, 'is required: the host token the server issued'),
    }),
  temporal: temporalSettings('127.0.0.1:7233').prefault({}),
  ingress: z.strictObject({ listen: address.default('0.0.0.0:7080') }).prefault({}),
});
export type HostSettings = z.output<typeof hostDocument>;
