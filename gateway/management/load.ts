/**
 * `GET /management/v1/metrics/load` (spec, "Reading load"): the live conditions of every model, or of
 * one with `?deployment=<id or name>`. It reads memory only (the routing table, the request queue's figures
 * and the hosts' latest samples) so it is cheap enough to poll every second.
 */
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { MaxRunning } from '../../engines/engine.js';
import { expectedMaxRunning } from '../../engines/rules.js';
import { apiErrors, CapyError } from '../../domain/catalogue.js';
import { type LoadReply, loadReply } from '../../api/load.js';
import { SAMPLE_STALE_AFTER_MS } from '../../domain/limits.js';
import type { LoadBoard, ReadSample } from '../loadBoard.js';
import type { RouterFigures } from '../routerFigures.js';
import type { RoutedDeployment, RoutedInstance, RoutingTable } from '../routingTable.js';
import { POLLED_LOG_LEVEL } from '../polledLogLevel.js';

const loadQuery = z.object({ deployment: z.string().min(1).optional() });

export interface LoadDeps {
  table: RoutingTable;
  board: LoadBoard;
  figures: RouterFigures;
}

/**
 * An instance's figure as the load endpoint shows it. `engine` and `state_cache` are the two sources
 * a host reports only once the engine said its own figure; for one instance the spec calls that
 * `engine`, while the deployment's figure keeps `state_cache` to say the engine runs fewer than asked.
 */
function instanceMaxRunning(sample: ReadSample | null, expected: MaxRunning): MaxRunning {
  if (!sample) return expected;
  const { maxRunning } = sample;
  return maxRunning.source === 'state_cache' ? { ...maxRunning, source: 'engine' } : maxRunning;
}

type DeploymentLoad = LoadReply['deployments'][number];

function renderSample(s: ReadSample): NonNullable<DeploymentLoad['instances'][number]['sample']> {
  return {
    sampled_at_ms: s.sampledAtMs,
    age_ms: s.ageMs,
    fresh: s.fresh,
    ingress_in_flight: s.ingressInFlight,
    engine: s.engine,
  };
}

function renderDeployment(d: RoutedDeployment, deps: LoadDeps, nowMs: number): DeploymentLoad {
  // Before any engine says, the figure is what CapyCTL passes or expects; the server does not know
  // the host's command, so it is `on_host` unless the deployment's arguments or declared figure fix it
  // (an option in the host's command would win over a declared one: its samples then say `host_fixed`).
  const expected = expectedMaxRunning({ spec: d.spec });
  // A sample of an earlier generation describes an engine that no longer runs; one of a parked or
  // stopped instance, a load it no longer holds (spec: null when the instance is not loaded).
  const sampleOf = (i: RoutedInstance) => {
    if (i.observedState === 'parked' || i.observedState === 'stopped') return null;
    const s = deps.board.read(d.id, i.index, nowMs);
    return s && s.generation === i.generation ? s : null;
  };
  const instances = d.instances.map((i) => ({ instance: i, sample: sampleOf(i) }));
  const router = deps.figures.deployment(d.id);
  return {
    deployment_id: d.id,
    name: d.name,
    router: {
      in_flight: router.inFlight,
      in_flight_limit: router.inFlightLimit,
      waiting: router.waiting,
      waiting_limit: router.waitingLimit,
    },
    // Every instance runs the same spec, so the first one sampled speaks for the deployment.
    max_running: instances.find((i) => i.sample)?.sample?.maxRunning ?? expected,
    instances: instances.map(({ instance: i, sample }) => ({
      index: i.index,
      host_id: i.hostId,
      generation: i.generation,
      observed_state: i.observedState,
      gpu_indexes: [...i.gpuIndexes],
      router_in_flight: deps.figures.instanceInFlight(d.id, i.index),
      max_running: instanceMaxRunning(sample, expected),
      sample: sample && renderSample(sample),
    })),
  };
}

export function loadRoutes(deps: LoadDeps) {
  return async (app: FastifyInstance) => {
    app
      .withTypeProvider<ZodTypeProvider>()
      .get(
        '/management/v1/metrics/load',
        { logLevel: POLLED_LOG_LEVEL, schema: { querystring: loadQuery, response: { 200: loadReply } } },
        async (request): Promise<LoadReply> => {
          const nowMs = Date.now();
          // By ID or by name, as every other management route takes a deployment.
          const { deployment: ref } = request.query;
          const asked = ref === undefined ? undefined : (deps.table.get(ref) ?? deps.table.byModel(ref));
          if (ref !== undefined && !asked) throw new CapyError(apiErrors.notFound('deployment', ref));
          const deployments = asked ? [asked] : deps.table.list();
          return {
            observed_at_ms: nowMs,
            stale_after_ms: SAMPLE_STALE_AFTER_MS,
            deployments: deployments.map((d) => renderDeployment(d, deps, nowMs)),
          };
        },
      );
  };
}
