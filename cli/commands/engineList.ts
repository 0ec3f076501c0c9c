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

const enabled = (on: boolean) => (on ? 'enabled' : 'disabled');

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
  };
}

export const engineList: Command = {
  words: ['engine', 'list'],
  summary: 'list the engines a deployment can name and how each parks',
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
    return exitCodes.ok;
  },
};
