/**
 * The simulator's command line: an engine's own flags (the few capyctl passes), the `--sim-*` flags,
 * and every other flag accepted and ignored, because real engines take hundreds and a launch plan
 * written for the real engine must start the simulator unchanged.
 *
 * Here, not in simulator/: the product reads it too, to measure a simulated model's checkpoint
 * from its `--sim-weights` and `--sim-kv` (activities/checkpoint.ts).
 */
import { engineContracts, type ParallelLayout } from './contracts.js';
import { findCount, findOption } from './launchOptions.js';
import { parallelLayout } from './parallelism.js';
import { parseBytes, parseDuration } from '../settings/units.js';

export const dialectNames = ['vllm', 'sglang', 'tensorfold'] as const;
export type DialectName = (typeof dialectNames)[number];

export interface SimTimings {
  loadMs: number;
  parkMs: number;
  wakeMs: number;
  /** Reloading the weights from disk after a deep park. */
  reloadMs: number;
  /** Per request, before its first token. */
  prefillMs: number;
  /**
   * Prompt tokens read per second, on top of `prefillMs`: a long prompt's first token comes later,
   * as on a real engine. Unset, a prompt's length costs nothing.
   */
  prefillTokensPerS: number | undefined;
  /** Per stream. */
  tokensPerS: number;
}

export interface SimConfig {
  dialect: DialectName;
  /** The checkpoint path: answers are derived from it, so renaming a model does not change them. */
  model: string;
  /** What `/v1/models` lists and requests must name. */
  servedModelName: string;
  host: string;
  port: number;
  /** Requests run at once; more wait inside the engine. */
  maxRunning: number;
  /** The value given on the command line, when there was one (SGLang reports it as such). */
  maxRunningFlag: number | undefined;
  weightsBytes: number;
  /** The KV cache declared (`--sim-kv`): what an engine without a bound takes, and what a checkpoint measures. */
  kvBytes: number;
  /**
   * What each rank keeps on its device while asleep (`--sim-residue`): its CUDA context and what
   * else sleep does not free. Taken at start with the weights, given back only when the process ends.
   */
  residueBytes: number;
  /**
   * `--sim-residue-unreported`: its checkpoint does not declare the residue, as a real engine's does
   * not, so the host's `parked_residue` is reserved and only the park's measurement finds the real one.
   */
  residueReported: boolean;
  /** K and V of one token over every layer (`--sim-kv-per-token`); unset, the engine checks no sequence length. */
  kvBytesPerToken: number | undefined;
  /** The model's own maximum length (`--sim-max-model-len`). */
  modelMaxLen: number;
  /** The longest sequence it serves: its context-length option, else the model's own. */
  maxModelLen: number;
  /**
   * The engine's GPU memory bound (`--gpu-memory-utilization`, `--mem-fraction-static`), when given:
   * a share of each device its ranks run on.
   */
  memoryShare: number | undefined;
  /** Its ranks, one per visible device, and the parts the weights are cut into (engines/parallelism.ts). */
  layout: ParallelLayout;
  timings: SimTimings;
  /** Set for a decision model: it answers one of these. */
  decisionOptions: string[] | undefined;
  /** Set to make the start fail: the engine prints a traceback ending in this line and exits 1. */
  exitAtStart: string | undefined;
  /** The engine release it plays (`--sim-version`): what it reports, and the routes' version-dependent behaviour. */
  version: string;
  enableSleepMode: boolean;
  enableMemorySaver: boolean;
  enableWeightsCpuBackup: boolean;
  enableMetrics: boolean;
  speculativeAlgorithm: string | undefined;
}

export class SimArgsError extends Error {
  override name = 'SimArgsError';
}

type FlagKind = 'string' | 'boolean';

/** The flag, without its dashes, that bounds the engine's GPU memory (contracts.ts); none for TensorFold. */
function boundFlag(dialect: DialectName): string | undefined {
  return engineContracts[dialect].memoryBound?.option.replace(/^--/, '');
}

/** The flag, without its dashes, that sets the longest sequence served (contracts.ts); none for TensorFold. */
function contextFlag(dialect: DialectName): string | undefined {
  return engineContracts[dialect].contextLength?.option.replace(/^--/, '');
}

/** The context length of a simulated model that declares none; `/v1/models` reports it. */
export const SIM_MAX_MODEL_LEN = 40960;

/** The engine flags each dialect understands; the same flag means the same thing in every dialect. */
const engineFlags: Record<DialectName, Record<string, FlagKind>> = {
  vllm: {
    model: 'string',
    port: 'string',
    host: 'string',
    'enable-sleep-mode': 'boolean',
    'max-num-seqs': 'string',
    'served-model-name': 'string',
  },
  sglang: {
    'model-path': 'string',
    model: 'string',
    port: 'string',
    host: 'string',
    'enable-memory-saver': 'boolean',
    'enable-weights-cpu-backup': 'boolean',
    'enable-metrics': 'boolean',
    'max-running-requests': 'string',
    'speculative-algorithm': 'string',
    'served-model-name': 'string',
  },
  // The contract did not name --served-model-name for TensorFold; capyctl's adapters pass it to every engine.
  tensorfold: {
    model: 'string',
    port: 'string',
    host: 'string',
    'max-running': 'string',
    'served-model-name': 'string',
  },
};

for (const dialect of dialectNames) {
  for (const flag of [boundFlag(dialect), contextFlag(dialect)])
    if (flag !== undefined) engineFlags[dialect][flag] = 'string';
}

const simFlags: Record<string, FlagKind> = {
  'sim-weights': 'string',
  'sim-kv': 'string',
  'sim-residue': 'string',
  'sim-residue-unreported': 'boolean',
  'sim-kv-per-token': 'string',
  'sim-max-model-len': 'string',
  'sim-load-ms': 'string',
  'sim-park-ms': 'string',
  'sim-wake-ms': 'string',
  'sim-reload-ms': 'string',
  'sim-prefill-ms': 'string',
  'sim-prefill-tokens-per-s': 'string',
  'sim-tokens-per-s': 'string',
  'sim-decision': 'string',
  'sim-exit-at-start': 'string',
  'sim-version': 'string',
};

const defaultPorts: Record<DialectName, number> = { vllm: 8000, sglang: 30000, tensorfold: 8080 };

interface Scanned {
  values: Map<string, string | true>;
  positionals: string[];
}

/**
 * Splits argv into known flags and positionals. An unknown `--flag` takes the next word as its value
 * unless that word is itself a flag: engines' unknown booleans are rare before a positional, and a
 * vLLM model given after one can be passed as `--model`.
 */
function scan(argv: readonly string[], known: Record<string, FlagKind>): Scanned {
  const values = new Map<string, string | true>();
  const positionals: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const word = argv[i]!;
    if (!word.startsWith('-') || word === '-') {
      positionals.push(word);
      continue;
    }
    const eq = word.indexOf('=');
    const name = word.slice(word.startsWith('--') ? 2 : 1, eq === -1 ? undefined : eq);
    const inline = eq === -1 ? undefined : word.slice(eq + 1);
    const kind = known[name];
    const next = argv[i + 1];
    const nextIsValue = next !== undefined && !next.startsWith('-');
    if (kind === 'boolean') {
      if (inline !== undefined && inline !== 'true' && inline !== 'false')
        throw new SimArgsError(`--${name} takes no value`);
      if (inline !== 'false') values.set(name, true);
    } else if (kind === 'string') {
      const value = inline ?? (nextIsValue ? next : undefined);
      if (value === undefined) throw new SimArgsError(`--${name} needs a value`);
      if (inline === undefined) i++;
      values.set(name, value);
    } else if (inline === undefined && nextIsValue) {
      i++; // an ignored engine flag's value
    }
  }
  return { values, positionals };
}

function text(values: Scanned['values'], name: string): string | undefined {
  const value = values.get(name);
  return typeof value === 'string' ? value : undefined;
}

function count(values: Scanned['values'], name: string, min: number): number | undefined {
  const raw = text(values, name);
  if (raw === undefined) return undefined;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min) throw new SimArgsError(`--${name} ${raw}: expected an integer ≥ ${min}`);
  return n;
}

function bytes(values: Scanned['values'], name: string, fallback: number): number {
  const raw = text(values, name);
  if (raw === undefined) return fallback;
  const n = parseBytes(raw);
  if (n === undefined) throw new SimArgsError(`--${name} ${raw}: expected a size such as 8GiB or 512MiB`);
  return n;
}

/** Milliseconds, as a plain number (the flags end in -ms) or with a unit ("2s"). */
function millis(values: Scanned['values'], name: string, fallback: number): number {
  const raw = text(values, name);
  if (raw === undefined) return fallback;
  const n = /^\d+(\.\d+)?$/.test(raw) ? Number(raw) : parseDuration(raw);
  if (n === undefined) throw new SimArgsError(`--${name} ${raw}: expected milliseconds or a duration such as 2s`);
  return n;
}

/** A share of the device, in (0, 1]. */
function share(values: Scanned['values'], name: string | undefined): number | undefined {
  const raw = name === undefined ? undefined : text(values, name);
  if (raw === undefined) return undefined;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0 || n > 1)
    throw new SimArgsError(`--${name} ${raw}: expected a share of the GPU above 0 and at most 1`);
  return n;
}

/** A positive rate, or undefined when the flag is not given. */
function rate(values: Scanned['values'], name: string): number | undefined {
  const raw = text(values, name);
  if (raw === undefined) return undefined;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0) throw new SimArgsError(`--${name} ${raw}: expected a positive number`);
  return n;
}

const GiB = 2 ** 30;

/**
 * The layout the dialect's own parallelism options give (engines/parallelism.ts); a value that is
 * not a whole number ≥ 1 is refused, as the engine's parser refuses it.
 */
function layout(dialect: DialectName, argv: readonly string[]): ParallelLayout {
  for (const { options } of engineContracts[dialect].parallelism?.factors ?? []) {
    const raw = findOption(argv, options);
    if (raw !== undefined && findCount(argv, options) === undefined)
      throw new SimArgsError(`${options[0]} ${raw}: expected an integer ≥ 1`);
  }
  return parallelLayout(dialect, argv);
}

/** Parses `DIALECT [engine args…]`; throws SimArgsError with a line for the user. */
export function parseSimArgs(argv: readonly string[]): SimConfig {
  const [dialect, ...rest] = argv;
  if (!dialectNames.includes(dialect as DialectName)) {
    throw new SimArgsError(`the first argument must be the dialect: ${dialectNames.join(', ')}`);
  }
  const name = dialect as DialectName;
  const { values, positionals } = scan(rest, { ...engineFlags[name], ...simFlags });

  const model =
    name === 'vllm' ? (positionals[0] ?? text(values, 'model')) : (text(values, 'model-path') ?? text(values, 'model'));
  if (!model)
    throw new SimArgsError(
      name === 'vllm'
        ? 'the model is missing: vllm MODEL [--port P …]'
        : `--${name === 'sglang' ? 'model-path' : 'model'} is missing`,
    );

  const maxRunningFlag =
    name === 'vllm'
      ? count(values, 'max-num-seqs', 1)
      : name === 'sglang'
        ? count(values, 'max-running-requests', 1)
        : count(values, 'max-running', 1);
  const port = count(values, 'port', 0) ?? defaultPorts[name];
  const modelMaxLen = count(values, 'sim-max-model-len', 1) ?? SIM_MAX_MODEL_LEN;
  const contextOption = contextFlag(name);
  if (port > 65535) throw new SimArgsError(`--port ${port}: not a TCP port`);
  const decision = text(values, 'sim-decision');
  const decisionOptions =
    decision === undefined
      ? undefined
      : decision
          .split(',')
          .map((o) => o.trim())
          .filter((o) => o !== '');
  if (decisionOptions !== undefined && decisionOptions.length === 0)
    throw new SimArgsError('--sim-decision needs at least one option');

  return {
    dialect: name,
    model,
    servedModelName: text(values, 'served-model-name') ?? model,
    host: text(values, 'host') ?? '127.0.0.1',
    port,
    maxRunning: maxRunningFlag ?? (name === 'tensorfold' ? 8 : 256),
    maxRunningFlag,
    weightsBytes: bytes(values, 'sim-weights', 8 * GiB),
    kvBytes: bytes(values, 'sim-kv', 2 * GiB),
    residueBytes: bytes(values, 'sim-residue', 0),
    residueReported: !values.has('sim-residue-unreported'),
    kvBytesPerToken: text(values, 'sim-kv-per-token') === undefined ? undefined : bytes(values, 'sim-kv-per-token', 0),
    modelMaxLen,
    maxModelLen: (contextOption === undefined ? undefined : count(values, contextOption, 1)) ?? modelMaxLen,
    memoryShare: share(values, boundFlag(name)),
    layout: layout(name, rest),
    timings: {
      loadMs: millis(values, 'sim-load-ms', 2000),
      parkMs: millis(values, 'sim-park-ms', 300),
      wakeMs: millis(values, 'sim-wake-ms', 500),
      reloadMs: millis(values, 'sim-reload-ms', 1500),
      prefillMs: millis(values, 'sim-prefill-ms', 0),
      prefillTokensPerS: rate(values, 'sim-prefill-tokens-per-s'),
      tokensPerS: rate(values, 'sim-tokens-per-s') ?? 50,
    },
    decisionOptions,
    exitAtStart: text(values, 'sim-exit-at-start'),
    version: text(values, 'sim-version') ?? engineContracts[name].version,
    enableSleepMode: values.has('enable-sleep-mode'),
    enableMemorySaver: values.has('enable-memory-saver'),
    enableWeightsCpuBackup: values.has('enable-weights-cpu-backup'),
    enableMetrics: values.has('enable-metrics'),
    speculativeAlgorithm: text(values, 'speculative-algorithm'),
  };
}
