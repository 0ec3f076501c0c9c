/** host.yaml (`capyctl start host`), and the `host:` section of a standalone document. */
import { z } from 'zod';
import { activations, memoryKinds } from '../domain/vocabulary.js';
import { address, bytes, durationMs, label, portRange } from './fields.js';
import { queueSettings, REQUEST_DEADLINE_DEFAULT_MS } from './queue.js';
import { TEMPORAL_DEV_ADDRESS, temporalSettings } from './temporal.js';

const GiB = 2 ** 30;

/** A GPU declared in the document; used when the machine has no `nvidia-smi` (simulated devices). */
const declaredGpu = z.strictObject({
  memory: bytes(GiB / 4, 4_096 * GiB),
  memory_kind: memoryKinds.default('discrete'),
});

/**
 * How the host launches an engine: the command its arguments follow. Point it at the engine
 * simulator (`["capyctl", "sim", "vllm"]`) to run without a GPU.
 */
const launchFields = (command: string[]) => ({
  command: z.array(z.string().min(1)).min(1).default(command),
  /** The engine's version when known ahead of a launch (some capability rules depend on it). */
  version: z.string().min(1).optional(),
  /**
   * Runs a version capyctl does not list as this listed one, whose requests it then takes; without
   * it, an engine reporting an unlisted version is refused at its start.
   */
  unlisted_version_as: z.string().min(1).optional(),
});

const engineLaunch = (command: string[]) => z.strictObject(launchFields(command)).prefault({});

/**
 * What a parked engine still holds on each of its GPUs (its CUDA context, CUDA graphs' pools and
 * allocations sleep does not free), counted by the ledger while it is parked and within what it
 * holds running. The default is vLLM's own test of sleep mode (`tests/basic_correctness/test_cumem.py`:
 * under 2 GiB after a level-1 sleep); CONTRACTS.md cites it. An engine simulator's `--sim-residue`
 * takes its place for the models it runs.
 */
export const PARKED_RESIDUE_DEFAULT = 2 * GiB;

/** An engine that parks: how it is launched, and what it keeps parked. */
const parkingEngineLaunch = (command: string[]) =>
  z
    .strictObject({ ...launchFields(command), parked_residue: bytes(0, 64 * GiB).default(PARKED_RESIDUE_DEFAULT) })
    .prefault({});

/** What a host says about itself, in a host document and in a standalone's `host:` section alike. */
export const hostSection = (requestDeadlineDefaultMs: number) =>
  z.strictObject({
    id: label.optional(),
    resource_policy: z.strictObject({ queue: queueSettings(requestDeadlineDefaultMs).prefault({}) }).prefault({}),
    lifecycle: z.strictObject({ activation: activations.default('on_demand') }).prefault({}),
    gpus: z.array(declaredGpu).default([]),
    host_ram: bytes(GiB / 4, 65_536 * GiB).optional(),
    /** How long a stopping host lets a running engine operation (a park, a wake) finish. */
    shutdown_grace: durationMs(1_000, 600_000).default(60_000),
    /** How long a stopped engine gets to exit after SIGTERM before it is killed. */
    engine_stop_grace: durationMs(100, 600_000).default(30_000),
    /**
     * The ports the host launches its engines on (a firewall's opening, a container's published
     * range); any free port when left out.
     */
    engine_ports: portRange().optional(),
    engines: z
      .strictObject({
        vllm: parkingEngineLaunch(['vllm', 'serve']),
        sglang: parkingEngineLaunch(['python3', '-m', 'sglang.launch_server']),
        tensorfold: engineLaunch(['tensorfold', 'serve']),
      })
      .prefault({}),
  });

export const hostDocument = hostSection(REQUEST_DEADLINE_DEFAULT_MS.server).extend({
  server: z.strictObject({
    url: z.url().default('http://127.0.0.1:7443'),
    token: z.string().min(1, 'is required: the host token the server issued'),
  }),
  temporal: temporalSettings(TEMPORAL_DEV_ADDRESS).prefault({}),
  /**
   * Where the server's requests come in, forwarded to the local engines. Loopback unless set: a
   * server on another machine needs an address it can reach (and `url`, when it reaches it by another name).
   */
  ingress: z
    .strictObject({
      listen: address.default('127.0.0.1:7080'),
      /** How the server reaches it; defaults to the listen address (with 127.0.0.1 for 0.0.0.0). */
      url: z.url().optional(),
    })
    .prefault({}),
  /** Engine logs and the simulated GPUs' ledger. */
  data_dir: z.string().min(1).default('.capyctl-host'),
});
export type HostSettings = z.output<typeof hostDocument>;
