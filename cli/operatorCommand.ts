/**
 * What every command over the management API shares: the connection flags, `--json`, its
 * arguments checked against its usage, and one way to end: exit 0, or one line naming the API's
 * code and message and exit 1, or a usage problem and exit 2.
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { type Command, exitCodes } from './command.js';
import {
  ApiRefusal,
  connectionOptions,
  ConnectionSetupError,
  type ManagementClient,
  managementClient,
} from './managementClient.js';

export interface OperatorContext {
  api: ManagementClient;
  /** The command's words after its name, as its usage names them. */
  args: readonly string[];
  flags: Record<string, string | boolean | undefined>;
  json: boolean;
}

export interface OperatorCommandSpec {
  words: readonly string[];
  summary: string;
  /** The arguments after the words, e.g. `NAME`; the usage line is built from them. */
  positionals: readonly string[];
  /** The command's own flags, beyond the connection's and `--json`. */
  options?: NonNullable<ParseArgsConfig['options']>;
  /** The usage's text for its own flags, e.g. `[--evict] [--wait]`. */
  flagsUsage?: string;
  example: string;
  run(context: OperatorContext): Promise<number>;
}

const CONNECTION_USAGE = '[--json] [--server URL] [--admin-token TOKEN | --admin-token-file FILE]';

/** Writes `value` as `--json` prints it. */
export const printJson = (value: unknown) => process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);

export function operatorCommand(spec: OperatorCommandSpec): Command {
  const usage = ['capyctl', ...spec.words, ...spec.positionals, spec.flagsUsage, CONNECTION_USAGE]
    .filter(Boolean)
    .join(' ');
  return {
    words: spec.words,
    summary: spec.summary,
    usage,
    example: spec.example,
    async run(argv) {
      const { values, positionals } = parseArgs({
        args: [...argv],
        options: { ...connectionOptions, json: { type: 'boolean' }, ...spec.options },
        allowPositionals: true,
      });
      if (positionals.length !== spec.positionals.length) {
        process.stderr.write(`capyctl: usage: ${usage}\n`);
        return exitCodes.usage;
      }
      const flags = values as Record<string, string | boolean | undefined>;
      try {
        const api = managementClient(flags);
        return await spec.run({ api, args: positionals, flags, json: flags.json === true });
      } catch (e) {
        if (e instanceof ConnectionSetupError) {
          process.stderr.write(`capyctl: ${e.message}\n`);
          return exitCodes.usage;
        }
        if (e instanceof ApiRefusal) {
          process.stderr.write(`capyctl: ${e.message}\n`);
          return exitCodes.refused;
        }
        throw e;
      }
    },
  };
}
