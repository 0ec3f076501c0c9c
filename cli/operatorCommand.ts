/**
 * What every command over the management API shares: the connection flags, `--json`, its
 * arguments checked against its usage, and one way to end: exit 0, or a failure it throws, which
 * main prints (the API's refusal exits 1, a usage problem 2; see failure.ts).
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';
import type { Command } from './command.js';
import { namedAsTyped } from './asTyped.js';
import { failure } from './failure.js';
import { connectionOptions, type ManagementClient, managementClient } from './managementClient.js';

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
  /** The first argument names a deployment: its refusals name it so, not by its ID. */
  namesDeployment?: true;
  /** The command's own flags, beyond the connection's and `--json`. */
  options?: NonNullable<ParseArgsConfig['options']>;
  /** The usage's text for its own flags, e.g. `[--evict] [--wait]`. */
  flagsUsage?: string;
  example: string;
  run(context: OperatorContext): Promise<number>;
}

/** The flags of a command that reaches the management API, as its usage line shows them. */
export const CONNECTION_USAGE = '[--json] [--server URL] [--admin-token TOKEN | --admin-token-file FILE]';

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
      if (positionals.length !== spec.positionals.length) throw await failure('usage', usage);
      const flags = values as Record<string, string | boolean | undefined>;
      const connected = await managementClient(flags);
      const named = spec.namesDeployment ? namedAsTyped(connected, positionals[0]!) : undefined;
      const context = { api: named?.api ?? connected, args: positionals, flags, json: flags.json === true };
      try {
        return await spec.run(context);
      } catch (e) {
        throw named ? await named.asTyped(e) : e;
      }
    },
  };
}
