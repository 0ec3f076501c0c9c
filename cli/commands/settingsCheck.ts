/** `capyctl settings check KIND [--file F] [--set k=v …] [--json]`: validates a document before a start. */
import { parseArgs } from 'node:util';
import { hostEnginesRefusals } from '../../engines/hostEngines.js';
import { documentRefusal } from '../../engines/rules.js';
import type { DeploymentSpec } from '../../settings/deploymentDocument.js';
import type { HostSettings } from '../../settings/hostDocument.js';
import {
  type BaseDocument,
  documentSchemas,
  type DocumentKind,
  loadSettingsFile,
  SettingsError,
} from '../../settings/load.js';
import { overridesFromEnv } from '../../settings/overrides.js';
import { baseDocument } from '../processSettings.js';
import { type Command, exitCodes, printJson } from '../command.js';
import { failure } from '../failure.js';

const kinds = Object.keys(documentSchemas) as DocumentKind[];

/** What was checked, as the line says it: the file (over the base), or the defaults, with what overrode them. */
function checked(
  kind: DocumentKind,
  file: string | undefined,
  base: BaseDocument | undefined,
  sets: readonly string[],
): string {
  const document =
    file === undefined ? (base?.origin ?? `the ${kind} defaults`) : base ? `${file} over ${base.origin}` : file;
  // Variables set a process's own settings, never a deployment's.
  const variables = kind === 'deployment' ? [] : overridesFromEnv(process.env).map((o) => o.source);
  const overrides = [...variables, ...sets.map((set) => `--set ${set}`)];
  return overrides.length === 0 ? document : `${document} with ${overrides.join(', ')}`;
}

/** The engines section a host agent of this document would run: a host's, or a standalone's host's. */
function hostEnginesOf(kind: DocumentKind, settings: unknown): HostSettings['engines'] | undefined {
  if (kind === 'host') return (settings as HostSettings).engines;
  if (kind === 'standalone') return (settings as { host: Pick<HostSettings, 'engines'> }).host.engines;
  return undefined;
}

export const settingsCheck: Command = {
  words: ['settings', 'check'],
  summary: 'validate a standalone, server, host or deployment document with its overrides',
  usage: `capyctl settings check ${kinds.join('|')} [--file F] [--set path=value …] [--json]`,
  example:
    'capyctl settings check standalone --file standalone.yaml --set ' +
    'host.resource_policy.queue.max_pending_per_deployment=0',
  async run(args) {
    const { values, positionals } = parseArgs({
      args: [...args],
      allowPositionals: true,
      options: { file: { type: 'string' }, set: { type: 'string', multiple: true }, json: { type: 'boolean' } },
    });
    const kind = positionals[0] as DocumentKind | undefined;
    if (!kind || !kinds.includes(kind) || positionals.length > 1) throw await failure('usage', this.usage);
    const sets = values.set ?? [];
    // The document the start would run: a standalone's file over its embedded defaults.
    const base = baseDocument(kind);
    const settings = loadSettingsFile(kind, values.file, { sets, base });
    // Refused here as a deploy would refuse it, before its first park would.
    const refusal = kind === 'deployment' ? documentRefusal(settings as DeploymentSpec) : null;
    if (refusal) {
      const { field, error } = refusal;
      throw new SettingsError(kind, values.file, [`${field}: ${error.code}: ${error.message}`]);
    }
    // Refused here as the agent's start would refuse it.
    const engines = hostEnginesOf(kind, settings);
    const engineProblems = engines ? hostEnginesRefusals(engines) : [];
    if (engineProblems.length > 0) throw new SettingsError(kind, values.file, engineProblems);
    if (values.json) printJson(settings);
    else process.stdout.write(`${checked(kind, values.file, base, sets)}: valid\n`);
    return exitCodes.ok;
  },
};
