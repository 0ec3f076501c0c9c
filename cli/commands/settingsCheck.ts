/** `capyctl settings check KIND [--file F] [--set k=v …] [--json]`: validates a document before a start. */
import { parseArgs } from 'node:util';
import { documentRefusal } from '../../activities/engines/rules.js';
import type { DeploymentSpec } from '../../settings/deploymentDocument.js';
import { documentSchemas, type DocumentKind, loadSettingsFile, SettingsError } from '../../settings/load.js';
import { type Command, exitCodes } from '../command.js';

const kinds = Object.keys(documentSchemas) as DocumentKind[];

export const settingsCheck: Command = {
  words: ['settings', 'check'],
  summary: 'validate a standalone, server, host or deployment document with its overrides',
  usage: `capyctl settings check ${kinds.join('|')} [--file F] [--set path=value …] [--json]`,
  example: 'capyctl settings check standalone --file standalone.yaml --set host.resource_policy.queue.max_pending_per_deployment=0',
  async run(args) {
    const { values, positionals } = parseArgs({
      args: [...args],
      allowPositionals: true,
      options: { file: { type: 'string' }, set: { type: 'string', multiple: true }, json: { type: 'boolean' } },
    });
    const kind = positionals[0] as DocumentKind | undefined;
    if (!kind || !kinds.includes(kind) || positionals.length > 1) {
      process.stderr.write(`usage: ${this.usage}\n`);
      return exitCodes.usage;
    }
    try {
      const settings = loadSettingsFile(kind, values.file, { sets: values.set ?? [] });
      // Refused here as a deploy would refuse it, before its first park would.
      const refusal = kind === 'deployment' ? documentRefusal(settings as DeploymentSpec) : null;
      if (refusal) throw new SettingsError(kind, values.file, [`residency: ${refusal.code}: ${refusal.message}`]);
      process.stdout.write(values.json ? `${JSON.stringify(settings, null, 2)}\n` : `${values.file ?? `the ${kind} defaults`}: valid\n`);
      return exitCodes.ok;
    } catch (e) {
      if (!(e instanceof SettingsError)) throw e;
      process.stderr.write(`${e.message}\n`);
      return exitCodes.usage;
    }
  },
};
