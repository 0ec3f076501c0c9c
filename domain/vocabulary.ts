/**
 * The spec's words, defined once. Every state, tier, residency, source and engine name that
 * crosses a boundary (a document, the store, an HTTP body, a printed table) comes from here.
 */
import { z } from 'zod';

export const engineNames = z.enum(['vllm', 'sglang', 'tensorfold']);
export type EngineName = z.infer<typeof engineNames>;

/** Where a deployment's weights go when it parks; absent in a document = chosen by the rules. */
export const residencies = z.enum(['host_backed', 'deep', 'restart_only']);
export type Residency = z.infer<typeof residencies>;

/**
 * How an instance is parked. `host_ram`: weights copied to host RAM; `deep`: weights dropped,
 * reloaded from disk on wake; `kv_only`: only the KV cache given back (SGLang with speculative
 * decoding keeps its weights).
 */
export const parkTiers = z.enum(['host_ram', 'deep', 'kv_only']);
export type ParkTier = z.infer<typeof parkTiers>;

export const memoryKinds = z.enum(['discrete', 'unified']);
export type MemoryKind = z.infer<typeof memoryKinds>;

/** `on_demand`: requests and memory pressure may start, wake, park and stop it. */
export const activations = z.enum(['on_demand', 'explicit']);
export type Activation = z.infer<typeof activations>;

/** What `capyctl list deployments` and the load endpoint show for an instance. */
export const instanceStates = z.enum([
  'starting',
  'ready',
  'draining',
  'parking',
  'parked',
  'waking',
  'stopping',
  'stopped',
  'failed',
]);
export type InstanceState = z.infer<typeof instanceStates>;

/**
 * What `capyctl list hosts` shows for a host: `draining` after an operator's drain, `stopping` while
 * its agent lets its running answers finish before it stops, `down` once it stopped reporting.
 */
export const hostStates = z.enum(['ready', 'draining', 'stopping', 'down']);
export type HostState = z.infer<typeof hostStates>;

/** Where a `max_running` figure comes from (spec, "Reading load"). */
export const maxRunningSources = z.enum([
  'engine',
  'declared',
  'default',
  'state_cache',
  'extra_args',
  'host_fixed',
  'engine_default',
  'on_host',
]);
export type MaxRunningSource = z.infer<typeof maxRunningSources>;

/**
 * Where the longest sequence an engine is launched to serve comes from: the deployment's
 * `max_model_len` (or its extra_args' option), the model's own maximum (its KV budget holds one
 * sequence of it), what the KV budget holds when that is less, or the engine's own choice (capyctl
 * passes nothing: the model's KV figures are not known, or the engine sizes no KV cache).
 */
export const maxModelLenSources = z.enum(['declared', 'model', 'kv_budget', 'engine_default']);
export type MaxModelLenSource = z.infer<typeof maxModelLenSources>;

/**
 * Where the residue a parked instance is counted at comes from: what its host measured its engine still
 * holds after the park, or the checkpoint's reservation (the host's `parked_residue`, or a simulated
 * model's own figure) when nothing was measured.
 */
export const residueSources = z.enum(['measured', 'reserved']);
export type ResidueSource = z.infer<typeof residueSources>;

/** How a switch ended; a search attribute on every switch workflow. */
export const switchOutcomes = z.enum([
  'running',
  'released',
  'drain_timeout',
  'wake_failed',
  'park_failed',
  'start_failed',
  'cancelled',
]);
export type SwitchOutcome = z.infer<typeof switchOutcomes>;

/**
 * The steps of a switch, each timed: the victims' admission window and drain, each victim's park
 * (or stop), the target's wake or start, a woken target's check, and the release of its waiters.
 */
export const switchPhases = z.enum(['window', 'drain', 'park', 'stop', 'wake', 'start', 'check', 'release']);
export type SwitchPhase = z.infer<typeof switchPhases>;
