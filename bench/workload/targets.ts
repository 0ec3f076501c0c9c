/**
 * The capyctl each strategy runs on, started as an operator starts it: `capyctl start standalone`
 * (two simulated 24 GiB cards) for the first three, `capyctl start server` with two `capyctl start
 * host` (one card each) for `two_hosts`; the fleet deployed, then loaded as an operator would before
 * traffic comes, so that no strategy pays a cold start the trace did not cause: every model started
 * once, least popular first, each start parking what it must (restart-only and `fixed` start only the
 * four the cards keep: a model that does not park keeps nothing from a start). Every strategy then
 * begins its trace with the four most popular models on the cards (what `fixed` keeps) and the other
 * two parked (capyctl), stopped (restart-only) or never started (`fixed`).
 *
 * Not `capyctl preinitialize` each model: it parks each one as soon as it started, so no model sees
 * the others ready when it is placed (before the scheduler chose the card fewer engines share, every
 * model started on the first card, and a parked engine wakes where it was launched; README, "What
 * the runs say about the open choices").
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import YAML from 'yaml';
import { Cluster, CLUSTER_ADMIN_TOKEN } from '../../test/support/cluster.js';
import { startStandaloneProcess } from '../../test/support/standalone.js';
import { deploymentDocument, type Fleet, fixedAssignment, scaledSettings, type Strategy } from './fleet.js';
import { Management } from './management.js';

export interface Target {
  strategy: Strategy;
  inferenceUrl: string;
  management: Management;
  close(): Promise<void>;
}

export interface TargetOptions {
  fleet: Fleet;
  temporalAddress: string;
  postgresAdminUrl: string;
  /** A folder of its own for this target's data. */
  dir: string;
  speed: number;
  /** The simulator's own process start, bench ms (simStart.ts). */
  processStartMs: number;
}

const GiB = 2 ** 30;
/** A command waits at most this long for memory (a switch under way), in bench time. */
const COMMAND_TIMEOUT_MS = 120_000;

/** A standalone on the fleet's cards, nothing deployed yet. */
export async function startStandalone(strategy: Strategy, o: TargetOptions): Promise<Target> {
  const { admissionWindow, drainTimeout } = scaledSettings(o.speed);
  const file = join(o.dir, 'standalone.yaml');
  writeFileSync(
    file,
    YAML.stringify({
      examples: false,
      server: { switching: { drain_timeout: drainTimeout } },
      host: {
        gpus: Array.from({ length: o.fleet.gpuCount }, () => ({ memory: `${o.fleet.gpuBytes / GiB}GiB` })),
        host_ram: `${(strategy === 'low_host_ram' ? o.fleet.lowHostRamBytes : o.fleet.hostRamBytes) / GiB}GiB`,
        resource_policy: { queue: { admission_window: admissionWindow } },
      },
    }),
  );
  const running = await startStandaloneProcess({
    temporalAddress: o.temporalAddress,
    dir: o.dir,
    file,
    outputToFile: true,
  });
  return {
    strategy,
    inferenceUrl: running.inferenceUrl,
    management: new Management(running.managementUrl, running.adminToken),
    close: async () => void (await running.stop()),
  };
}

async function twoHosts(o: TargetOptions): Promise<Target> {
  const { admissionWindow, drainTimeout } = scaledSettings(o.speed);
  const host = {
    gpuMemory: `${o.fleet.gpuBytes / GiB}GiB`,
    hostRam: `${o.fleet.hostRamBytes / GiB}GiB`,
    yaml: `resource_policy: { queue: { admission_window: ${admissionWindow} } }`,
  };
  const cluster = await Cluster.start({
    services: { temporalAddress: o.temporalAddress, postgresAdminUrl: o.postgresAdminUrl },
    serverYaml: `switching: { drain_timeout: ${drainTimeout} }`,
    hosts: [host, host],
  });
  return {
    strategy: 'two_hosts',
    inferenceUrl: cluster.inferenceUrl,
    management: new Management(cluster.managementUrl, CLUSTER_ADMIN_TOKEN),
    close: () => cluster.close(),
  };
}

/**
 * The start order of `gpu_by_popularity`: m5 and m6 fill the first card, m1 and m2 the second,
 * then m3 and m4 each park one of the first card's (the fewest victims, ties to the lower card).
 */
const BY_POPULARITY = ['m5-8b', 'm6-small', 'm1-8b', 'm2-small', 'm3-8b', 'm4-small'];

/** Brings the fleet to where the strategy starts its traffic from. */
async function warmUp(target: Target, fleet: Fleet): Promise<void> {
  const m = target.management;
  if (target.strategy === 'preinitialized') {
    for (const f of fleet.models) await m.command(f.name, 'preinitialize', COMMAND_TIMEOUT_MS);
    return;
  }
  const kept = new Set(fixedAssignment(fleet).flat());
  const parks = target.strategy !== 'fixed' && target.strategy !== 'restart_only';
  const models = fleet.models
    .map((f) => f.name)
    .filter((name) => parks || kept.has(name))
    .reverse();
  for (const name of target.strategy === 'gpu_by_popularity' ? BY_POPULARITY : models) {
    await m.command(name, 'start', COMMAND_TIMEOUT_MS, { evict: target.strategy !== 'fixed' });
    await m.until(`${name} to be ready`, COMMAND_TIMEOUT_MS, async () => (await m.state(name)) === 'ready');
  }
}

/** Where each model stands: `m1-8b ready on host-1`, as `capyctl list deployments` says. */
export async function placement(m: Management): Promise<string> {
  const list = await m.call('GET', '/management/v1/deployments');
  return (list.deployments as any[])
    .map((d) => `${d.name} ${d.state}${d.hosts?.length ? ` on ${d.hosts.join(',')}` : ''}`)
    .join(', ');
}

export async function startTarget(strategy: Strategy, o: TargetOptions): Promise<Target> {
  if (!o.fleet.strategies.includes(strategy))
    throw new Error(`${strategy} is not run on the ${o.fleet.name} fleet (${o.fleet.strategies.join(', ')})`);
  const target = strategy === 'two_hosts' ? await twoHosts(o) : await startStandalone(strategy, o);
  try {
    for (const model of o.fleet.models) await target.management.deploy(deploymentDocument(model, strategy, o));
    await warmUp(target, o.fleet);
    return target;
  } catch (e) {
    await target.close();
    throw e;
  }
}
