/**
 * `capyctl status deployment NAME [--json]`: one deployment, its activation, its checkpoint, why its
 * last start failed, its restarts and last problem, and where its instances are parked.
 */
import { maxModelLenWords, parkTierWords, residueSourceWords } from '../../domain/catalogue.js';
import { formatBytes } from '../../settings/units.js';
import type { DeploymentBody } from '../../api/deployments.js';
import { exitCodes, printJson } from '../command.js';
import { operatorCommand } from '../operatorCommand.js';
import { table } from '../table.js';
import { CRASH_LOOP } from '../../domain/problems.js';
import { deploymentsTable } from './listDeployments.js';

/**
 * Its restarts, a crash loop, and its last problem: what happened, when, where, and an exited engine's
 * last lines of stderr below it.
 */
function problemFacts(d: DeploymentBody): string[][] {
  const facts = [['restarts', String(d.restarts)]];
  if (d.crash_loop)
    facts.push([
      'crash_loop',
      `yes: its engine ended unasked ${CRASH_LOOP.endings} times within ${CRASH_LOOP.withinMs / 60_000} minutes`,
    ]);
  const p = d.last_problem;
  if (p) {
    const stderr = (p.stderr ?? []).map((l) => `\n  ${l}`).join('');
    const where = `on ${p.host_id} (instance ${p.instance_index}, generation ${p.generation})`;
    facts.push(['last_problem', `${p.kind} at ${p.at} ${where}: ${p.message}${stderr}`]);
  }
  return facts;
}

/**
 * What an instance reserves and the longest sequence its engine serves, once measured; parked, what
 * its engine is counted as keeping and where that figure comes from.
 */
function memoryFacts({ memory: m, instances }: DeploymentBody): [string, string][] {
  if (m === undefined) return [];
  const kept = instances.flatMap((i): [string, string][] =>
    i.parked_residue_bytes !== undefined && i.parked_residue_from !== undefined
      ? [['kept_parked', `${formatBytes(i.parked_residue_bytes)} (${residueSourceWords[i.parked_residue_from]})`]]
      : [],
  );
  return [
    [
      'reserved',
      `${formatBytes(m.weight_bytes)} weights + ${formatBytes(m.kv_bytes)} KV cache + ` +
        `${formatBytes(m.parked_residue_bytes)} kept parked`,
    ],
    ...kept,
    ['max_model_len', `${m.max_model_len ?? '-'} (${maxModelLenWords[m.max_model_len_from]})`],
  ];
}

export const statusDeployment = operatorCommand({
  words: ['status', 'deployment'],
  summary: 'show one deployment: its row, ID, activation, checkpoint and instances',
  positionals: ['NAME'],
  namesDeployment: true,
  example: 'capyctl status deployment my-model --json',
  async run({ api, args: [name], json }) {
    const d = await api.call<DeploymentBody>('GET', `/deployments/${encodeURIComponent(name!)}`);
    if (json) {
      printJson(d);
      return exitCodes.ok;
    }
    const facts = [
      ['deployment_id', d.deployment_id],
      ['activation', d.activation],
      ['checkpoint', d.checkpoint],
      // Why it could not be measured: what the operator fixes before a start can help.
      ...(d.checkpoint_failure !== undefined ? [['checkpoint_failure', d.checkpoint_failure]] : []),
      ...memoryFacts(d),
      ['operator_stopped', d.operator_stopped ? 'yes' : 'no'],
    ];
    process.stdout.write(deploymentsTable([d]));
    if (d.start_failure !== undefined) facts.push(['start_failure', d.start_failure]);
    facts.push(...problemFacts(d));
    process.stdout.write(`\n${facts.map(([k, v]) => `${k}: ${v}`).join('\n')}\n`);
    if (d.instances.length > 0) {
      const rows = d.instances.map((i) => [
        String(i.index),
        i.host_id,
        String(i.generation),
        i.state,
        i.park_tier ? parkTierWords[i.park_tier] : '-',
      ]);
      process.stdout.write(`\n${table(['INSTANCE', 'HOST', 'GENERATION', 'STATE', 'PARKED IN'], rows)}`);
    }
    return exitCodes.ok;
  },
});
