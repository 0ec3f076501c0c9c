/**
 * `capyctl engine list [--json]`: what each engine can do, so a deployment can pick one. The engines
 * are this capyctl's own: it takes the connection flags as every other command does (a script passes
 * them to each), and needs no server to answer.
 */
import { parseArgs } from 'node:util';
import { engineContracts } from '../../engines/contracts.js';
import { engineTraits } from '../../engines/traits.js';
import { engineNames } from '../../domain/vocabulary.js';
import { type Command, exitCodes, printJson } from '../command.js';
import { connectionOptions } from '../managementClient.js';
import { CONNECTION_USAGE } from '../operatorCommand.js';
import { table } from '../table.js';
import { PARKED_RESIDUE_DEFAULT } from '../../settings/hostDocument.js';
import { formatBytes } from '../../settings/units.js';

const enabled = (on: boolean) => (on ? 'enabled' : 'disabled');

type EngineRow = ReturnType<typeof engineRow>;

/** One engine as `--json` prints it; the table shows the same fields. */
function engineRow(name: (typeof engineNames.options)[number]) {
  const { parkTiers, defaultMaxRunning } = engineTraits[name];
  return {
    name,
    deep_park: enabled(parkTiers.includes('deep')),
    host_ram_park: enabled(parkTiers.includes('host_ram')),
    /** null: the engine chooses at start and CapyCTL passes nothing. */
    default_max_running: defaultMaxRunning ?? null,
    max_running_option: engineContracts[name].maxRunning.option,
    /** The option CapyCTL bounds the engine's GPU memory with; null when the engine has none. */
    memory_bound_option: engineContracts[name].memoryBound?.option ?? null,
    /**
     * The options whose values multiply into the GPUs one instance runs on, each with every spelling
     * the engine takes; none for an engine that runs on one GPU.
     */
    parallelism: (engineContracts[name].parallelism?.factors ?? []).map((f) => ({
      options: [...f.options],
      splits: f.splits,
      not_with: [...(f.notWith ?? [])],
    })),
    /** The option CapyCTL passes the longest sequence the KV budget holds in; null when it passes none. */
    max_model_len_option: engineContracts[name].contextLength?.option ?? null,
    /** What the engine does when its KV cache cannot hold one sequence of that length. */
    kv_too_small: engineContracts[name].contextLength?.rule ?? null,
    /** What the ledger counts a parked engine as still holding on each GPU unless the host says otherwise; null when it cannot park. */
    parked_residue_default: parkTiers.length > 0 ? PARKED_RESIDUE_DEFAULT : null,
  };
}

const kvTooSmallWords = { refuses_at_start: 'refuses to start', clamps: 'clamps requests' } as const;

/** `--tensor-parallel-size/-tp × --pipeline-parallel-size/-pp`: what the GPUs per instance are the product of. */
function gpusPerInstance(e: EngineRow): string {
  if (e.parallelism.length === 0) return '1';
  return e.parallelism
    .map((f) => f.options.join('/') + (f.not_with.length > 0 ? ` (1 with ${f.not_with.join(', ')})` : ''))
    .join(' × ');
}

export const engineList: Command = {
  words: ['engine', 'list'],
  summary:
    'list the engines a deployment can name, how each parks, what runs it on several GPUs and how its memory is sized',
  usage: `capyctl engine list ${CONNECTION_USAGE}`,
  example: 'capyctl engine list',
  async run(args) {
    const { values } = parseArgs({ args: [...args], options: { ...connectionOptions, json: { type: 'boolean' } } });
    const engines = engineNames.options.map(engineRow);
    if (values.json) {
      printJson(engines);
      return exitCodes.ok;
    }
    const rows = engines.map((e) => [
      e.name,
      e.deep_park,
      e.host_ram_park,
      e.default_max_running === null ? 'chosen by engine' : String(e.default_max_running),
      e.max_running_option,
      e.memory_bound_option ?? 'none',
    ]);
    process.stdout.write(
      table(
        ['NAME', 'DEEP PARK', 'HOST RAM PARK', 'DEFAULT MAX RUNNING', 'MAX RUNNING OPTION', 'MEMORY BOUND OPTION'],
        rows,
      ),
    );
    // Its own table: the spellings are too long for a column beside the others.
    process.stdout.write(
      `\n${table(
        ['NAME', 'GPUS PER INSTANCE'],
        engines.map((e) => [e.name, gpusPerInstance(e)]),
      )}`,
    );
    process.stdout.write(
      `\n${table(
        ['NAME', 'MAX MODEL LEN OPTION', 'KV TOO SMALL FOR IT', 'PARKED RESIDUE'],
        engines.map((e) => [
          e.name,
          e.max_model_len_option ?? 'none',
          e.kv_too_small === null ? '-' : kvTooSmallWords[e.kv_too_small],
          e.parked_residue_default === null ? 'none' : `${formatBytes(e.parked_residue_default)} a GPU`,
        ]),
      )}`,
    );
    return exitCodes.ok;
  },
};
