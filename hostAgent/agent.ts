/**
 * The host agent (`capyctl start host`): registers the machine's GPUs with the server, runs the
 * engine activities on `host-<hostId>`, supervises the engines, reports their load every second
 * and forwards the server's requests to them.
 */
import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { join, resolve } from 'node:path';
import { NativeConnection, Worker } from '@temporalio/worker';
import type { Logger } from 'pino';
import { adapters } from '../activities/engines/index.js';
import { createHostActivities } from '../activities/hostActivities.js';
import { type EngineName, engineNames } from '../domain/vocabulary.js';
import { hostEnginesRefusals } from '../engines/hostEngines.js';
import { installTemporalRuntime } from '../logging/temporalRuntime.js';
import type { HostSettings } from '../settings/hostDocument.js';
import { listenAddress, urlHost } from '../settings/listenAddress.js';
import { createSimulatedGpu } from './simulatedGpu.js';
import { taskQueues } from '../workflows/definitions.js';
import { discoverGpus } from './gpus.js';
import { Ingress } from './ingress.js';
import { LoadSampler } from './loadSampler.js';
import { registrationOf } from './registration.js';
import { type GpuSource, gpuBytesOfProcess } from './gpuMemory.js';
import { hostMetrics } from './metrics.js';
import { buildInfo } from '../processes/build.js';
import { type Registration, RegistrationRefused, ServerClient } from './serverClient.js';
import { EngineSupervisor, type InstanceSlot } from '../activities/supervisor.js';
import { lastStderrLines } from '../domain/problems.js';

export interface HostAgentOptions {
  /**
   * Requests being forwarded to an instance now (`ingress_in_flight`, and what keeps a busy engine
   * from parking); the ingress's count when absent. A standalone forwards to its engines directly,
   * so it counts the gateway's.
   */
  inFlightOf?: (key: InstanceSlot) => number;
}

export interface RunningHostAgent {
  hostId: string;
  ingressUrl: string;
  /** The base URL of the engine an instance runs on this host now, if it runs one. */
  engineUrl(key: InstanceSlot): string | undefined;
  /**
   * Tells the server this host stops (nothing new is routed here), lets the answers running through
   * the ingress finish and then the running engine operations (each within the shutdown grace),
   * then stops the engines.
   */
  stop(): Promise<void>;
}

const REGISTER_RETRY_MS = 1_000;
/** How often a stopping agent looks whether the answers running through its ingress have finished. */
const STOP_POLL_MS = 50;

/** The host's ID: declared, or the machine's name made a DNS label. */
export const hostIdOf = (settings: Pick<HostSettings, 'id'>) =>
  settings.id ??
  (hostname()
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 63) ||
    'host');

/** Registers; returns the ingress secret and the metrics token the server gave. */
async function registerUntilAccepted(
  server: ServerClient,
  body: Parameters<ServerClient['register']>[0],
  logger: Logger,
): Promise<Registration> {
  for (;;) {
    try {
      return await server.register(body);
    } catch (e) {
      if (e instanceof RegistrationRefused) throw e;
      logger.warn({ err: (e as Error).message }, 'server not reachable yet; retrying registration');
      await new Promise((r) => setTimeout(r, REGISTER_RETRY_MS));
    }
  }
}

/** A host whose `engines` section would let an engine run behind capyctl's back or name an unknown version. */
export class HostEnginesRefused extends Error {
  override name = 'HostEnginesRefused';
}

/** The host document's `engines` section as the host's activities take it, engine by engine. */
function perEngine(engines: HostSettings['engines']) {
  const each = <T>(pick: (name: EngineName) => T) =>
    Object.fromEntries(engineNames.options.map((name) => [name, pick(name)])) as Record<EngineName, T>;
  return {
    engineCommands: each((name) => engines[name].command),
    unlistedVersionsAs: each((name) => engines[name].unlisted_version_as),
    parkedResidueBytes: {
      vllm: engines.vllm.parked_residue,
      sglang: engines.sglang.parked_residue,
      tensorfold: 0,
    },
  };
}

export async function startHostAgent(
  settings: HostSettings,
  logger: Logger,
  options: HostAgentOptions = {},
): Promise<RunningHostAgent> {
  const refusals = hostEnginesRefusals(settings.engines);
  if (refusals.length > 0) throw new HostEnginesRefused(refusals.join('; '));
  const hostId = hostIdOf(settings);
  const log = logger.child({ hostId });
  const dataDir = resolve(settings.data_dir);
  const { gpus, simulated } = discoverGpus(settings);
  const engineEnv: Record<string, string> = {};
  if (simulated) {
    const gpuDir = join(dataDir, 'sim-gpus');
    for (const gpu of gpus) await createSimulatedGpu(gpuDir, gpu.index, gpu.memoryBytes);
    engineEnv.CAPYCTL_SIM_GPU_DIR = gpuDir;
  }

  const server = new ServerClient(settings.server.url, settings.server.token, hostId);
  const supervisor = new EngineSupervisor({
    logDir: join(dataDir, 'engine-logs'),
    logger: log,
    onUnexpectedExit: (engine, exit) =>
      void server
        .reportEngineExit({
          deployment_id: engine.key.deploymentId,
          instance_index: engine.key.instanceIndex,
          generation: engine.key.generation,
          exit_code: exit.code,
          signal: exit.signal,
          stderr: lastStderrLines(exit.stderrTail),
        })
        .catch((e) => log.error({ err: e }, 'could not report an engine exit')),
  });
  const ingress = new Ingress(supervisor);
  const inFlightOf = options.inFlightOf ?? ((key: InstanceSlot) => ingress.inFlightOf(key));
  const ingressAt = listenAddress(settings.ingress.listen);
  const { port } = await ingress.listen(ingressAt.host, ingressAt.port);
  const ingressUrl = settings.ingress.url ?? `http://${urlHost(ingressAt.host)}:${port}`;

  const sampler = new LoadSampler({ supervisor, inFlightOf, server, logger: log });
  const gpuSource: GpuSource = simulated
    ? { kind: 'simulated', dir: engineEnv.CAPYCTL_SIM_GPU_DIR!, indexes: gpus.map((g) => g.index) }
    : { kind: 'nvidia' };
  ingress.serveMetrics(hostMetrics({ hostId, supervisor, sampler, gpus: gpuSource, build: buildInfo() }));

  const registration = await registerUntilAccepted(
    server,
    registrationOf(hostId, settings, gpus, ingressUrl),
    log,
  ).catch(async (e) => {
    await ingress.close();
    throw e;
  });
  ingress.accept(registration);
  log.info({ gpus: gpus.length, simulated, ingressUrl }, 'host registered');

  installTemporalRuntime(log);
  const connection = await NativeConnection.connect({ address: settings.temporal.address });
  const worker = await Worker.create({
    connection,
    namespace: settings.temporal.namespace,
    taskQueue: taskQueues.host(hostId),
    activities: createHostActivities({
      adapters,
      supervisor,
      ...perEngine(settings.engines),
      largestGpuBytes: Math.max(0, ...gpus.map((g) => g.memoryBytes)),
      engineEnv,
      engineStopGraceMs: settings.engine_stop_grace,
      enginePorts: settings.engine_ports,
      gpuBytesOf: (pid) => gpuBytesOfProcess(gpuSource, pid),
      ingressInFlight: inFlightOf,
      logger: log,
    }),
    shutdownGraceTime: settings.shutdown_grace,
    // A stop always ends: an engine operation still running at twice the grace is retried by the
    // switch against the next start of this host.
    shutdownForceTime: 2 * settings.shutdown_grace,
  });
  const running = worker.run();
  sampler.start();

  return {
    hostId,
    ingressUrl,
    engineUrl: (key) => supervisor.live(key)?.endpoint.baseUrl,
    async stop() {
      // The sampler goes on meanwhile: its reports are the heartbeat that keeps this host from being
      // taken for down while its answers finish.
      await server
        .reportStopping()
        .catch((e: unknown) =>
          log.info(
            { err: (e as Error).message },
            'the server did not hear that this host stops; it will see the reports stop',
          ),
        );
      const drainedBy = Date.now() + settings.shutdown_grace;
      while (ingress.inFlightTotal() > 0 && Date.now() < drainedBy) await sleep(STOP_POLL_MS);
      const cut = ingress.inFlightTotal();
      if (cut > 0) log.warn({ running: cut }, 'answers still running at the shutdown grace are cut');
      await sampler.stop();
      worker.shutdown();
      await running.catch((e: unknown) => log.warn({ err: e }, 'the worker stopped with engine operations unfinished'));
      await supervisor.stopAll(settings.engine_stop_grace);
      await ingress.close();
      await connection.close();
      log.info('host agent stopped');
    },
  };
}
