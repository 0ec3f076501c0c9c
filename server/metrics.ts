/**
 * The server's Prometheus metrics (`GET /metrics` on the management listener): its own registry,
 * not prom-client's global one, so two servers in one process (tests, benches) keep apart. The
 * places that observe call the small typed functions here; gauges are read at each scrape from the
 * queue, the load board and the store.
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { SwitchOutcome } from '../domain/vocabulary.js';
import type { LoadBoard } from '../gateway/loadBoard.js';
import type { RequestEnd, RequestMetrics } from '../gateway/requestMetrics.js';
import type { ErrorCounts } from '../gateway/statusHistory.js';
import type { RequestQueue } from '../gateway/requestQueue.js';
import type { RoutingTable } from '../gateway/routingTable.js';
import { engineGauges, gpuMemoryGauge } from '../metrics/engineGauges.js';
import type { Db } from '../store/db.js';
import { listHosts } from '../store/hosts.js';
import { listInstances } from '../store/instances.js';
import { heldOnGpu } from '../gateway/gpuHoldings.js';
import type { PhaseTiming } from '../api/lifecycle.js';
import type { BuildInfo } from '../processes/build.js';
import { buildInfoGauge } from '../metrics/buildInfo.js';
import { NONE, parkTierLabel } from '../metrics/labelValues.js';
import { deploymentStateGauge, type HostReporting, hostUpGauge } from './stateGauges.js';

// Waits run from nothing (a model serving) to a deep park's wake or a cold start.
const WAIT_BUCKETS = [0.005, 0.025, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900];
const PHASE_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900];

const SECOND = 1_000;

/** What the gauges read at each scrape, and which capyctl this is. */
export interface MetricSources {
  table: RoutingTable;
  queue: RequestQueue;
  board: LoadBoard;
  db: Db;
  /** Every host the server knows, and whether it reports. */
  hosts: () => HostReporting[];
  build: BuildInfo;
  now?: () => number;
}

/** How a switch ended, as its last receipt says: its outcome, its steps' times, when it began and ended. */
export interface EndedSwitch {
  outcome: SwitchOutcome;
  phases?: readonly PhaseTiming[];
  startedAtMs: number;
  finishedAtMs: number | null;
}

/** An engine that exited unasked, as its host reported it: an exit code, or the signal that ended it. */
export interface EngineExit {
  deploymentId: string;
  exitCode: number | null;
  signal: string | null;
}

export class ServerMetrics implements RequestMetrics {
  readonly registry = new Registry();
  private readonly requests: Counter<'deployment' | 'code' | 'error'>;
  private readonly waits: Histogram<'deployment'>;
  private readonly firstOutputs: Histogram<'deployment'>;
  private readonly switches: Counter<'outcome'>;
  private readonly switchDurations: Histogram<'outcome'>;
  private readonly phases: Histogram<'phase' | 'park_tier'>;
  private readonly engineExits: Counter<'host' | 'deployment' | 'exit_code' | 'signal'>;

  constructor(private readonly sources: MetricSources) {
    const registers = [this.registry];
    this.requests = new Counter({
      name: 'capyctl_requests_total',
      help:
        'Inference requests answered, by deployment ((unrouted) for one refused before it was routed), ' +
        'HTTP status code (0 when none went out) and error (the catalogue’s code, cut, or none).',
      labelNames: ['deployment', 'code', 'error'],
      registers,
    });
    this.waits = new Histogram({
      name: 'capyctl_request_wait_seconds',
      help: 'How long a request waited in the gateway’s queue before it went to an engine.',
      labelNames: ['deployment'],
      buckets: WAIT_BUCKETS,
      registers,
    });
    this.firstOutputs = new Histogram({
      name: 'capyctl_request_time_to_first_byte_seconds',
      help: 'From a request’s arrival to its first output to the client: the wait, any switch, and the prefill.',
      labelNames: ['deployment'],
      buckets: WAIT_BUCKETS,
      registers,
    });
    this.switches = new Counter({
      name: 'capyctl_switches_total',
      help: 'Switches ended, by outcome.',
      labelNames: ['outcome'],
      registers,
    });
    this.switchDurations = new Histogram({
      name: 'capyctl_switch_duration_seconds',
      help: 'How long each switch took, from its beginning to its last receipt, by outcome.',
      labelNames: ['outcome'],
      buckets: PHASE_BUCKETS,
      registers,
    });
    this.phases = new Histogram({
      name: 'capyctl_switch_phase_seconds',
      help:
        'How long each step of a switch took: ' +
        'window, drain, park (by park tier), stop, wake (by tier), start, check, release.',
      labelNames: ['phase', 'park_tier'],
      buckets: PHASE_BUCKETS,
      registers,
    });
    this.engineExits = new Counter({
      name: 'capyctl_engine_exits_total',
      help: 'Engines that exited unasked, by host, deployment, and exit code or signal (none for the one it lacks).',
      labelNames: ['host', 'deployment', 'exit_code', 'signal'],
      registers,
    });
    this.gaugesReadAtScrape();
  }

  answered(deployment: string, status: number, end: RequestEnd): void {
    this.requests.inc({ deployment, code: String(status), error: end });
  }

  /**
   * Requests answered with an error since the server started, by code, the most frequent first, as
   * `capyctl_requests_total` counts them: the catalogue's code, or an engine's own error passed on
   * whole by its status (`engine 500`).
   */
  async errorsByCode(): Promise<ErrorCounts> {
    const counts = new Map<string, number>();
    for (const { labels, value } of (await this.requests.get()).values) {
      const [code, error] = [String(labels.code), String(labels.error)];
      const key = error === 'cut' ? null : error !== 'none' ? error : Number(code) >= 400 ? `engine ${code}` : null;
      if (key !== null) counts.set(key, (counts.get(key) ?? 0) + value);
    }
    return [...counts].map(([code, count]) => ({ code, count })).sort((a, b) => b.count - a.count);
  }

  waited(deployment: string, seconds: number): void {
    this.waits.observe({ deployment }, seconds);
  }

  firstOutput(deployment: string, seconds: number): void {
    this.firstOutputs.observe({ deployment }, seconds);
  }

  /** A switch ended: its outcome, how long it took, and how long each of its steps took. */
  switchEnded({ outcome, phases = [], startedAtMs, finishedAtMs }: EndedSwitch): void {
    this.switches.inc({ outcome });
    if (finishedAtMs !== null) this.switchDurations.observe({ outcome }, (finishedAtMs - startedAtMs) / SECOND);
    for (const p of phases) this.phases.observe({ phase: p.phase, park_tier: parkTierLabel(p.tier) }, p.ms / SECOND);
  }

  /** A host reported an engine that exited unasked. */
  engineExited(hostId: string, exit: EngineExit): void {
    this.engineExits.inc({
      host: hostId,
      deployment: this.sources.table.get(exit.deploymentId)?.name ?? exit.deploymentId,
      exit_code: exit.exitCode === null ? NONE : String(exit.exitCode),
      signal: exit.signal ?? NONE,
    });
  }

  /** The gauges read from what the server keeps, at each scrape; nothing here is sampled on its own. */
  private gaugesReadAtScrape(): void {
    const { table, queue, board, db } = this.sources;
    const now = this.sources.now ?? Date.now;
    const registers = [this.registry];
    const queueGauge = (
      name: string,
      help: string,
      value: (figures: ReturnType<RequestQueue['deployment']>) => number,
    ) =>
      new Gauge({
        name,
        help,
        labelNames: ['deployment'],
        registers,
        collect() {
          this.reset();
          for (const d of table.list()) this.set({ deployment: d.name }, value(queue.deployment(d.id)));
        },
      });
    queueGauge(
      'capyctl_queue_requests_waiting',
      'Requests waiting in the gateway’s queue for the deployment.',
      (f) => f.waiting,
    );
    queueGauge(
      'capyctl_queue_requests_in_flight',
      'Requests the gateway runs on the deployment now.',
      (f) => f.inFlight,
    );
    // Fresh samples only: a host reports its ready engines, so a parked one's last sample goes stale.
    engineGauges(this.registry, () =>
      board.list(now()).flatMap((s) =>
        s.fresh && s.engine
          ? [
              {
                host: s.hostId,
                deployment: table.get(s.deploymentId)?.name ?? s.deploymentId,
                instanceIndex: s.instanceIndex,
                load: s.engine,
              },
            ]
          : [],
      ),
    );
    // The catalogue's record of what each instance holds on which GPUs, written as each step of a switch begins.
    gpuMemoryGauge(this.registry, async () => {
      const [instances, hosts] = await Promise.all([listInstances(db), listHosts(db)]);
      return hosts.flatMap((h) =>
        instances
          .filter((i) => i.hostId === h.id && i.gpuBytes > 0)
          .flatMap((i) =>
            h.gpus
              .map((g) => ({
                host: h.id,
                gpu: g.index,
                state: i.observedState,
                parkTier: i.parkTier,
                bytes: heldOnGpu(i, g.index),
              }))
              .filter((held) => held.bytes > 0),
          ),
      );
    });
    new Gauge({
      name: 'capyctl_gpu_memory_total_bytes',
      help: 'The memory of each GPU of a registered host: what is free of it is this less capyctl_gpu_memory_bytes.',
      labelNames: ['host', 'gpu'],
      registers,
      async collect() {
        const hosts = await listHosts(db);
        this.reset();
        for (const h of hosts) for (const g of h.gpus) this.set({ host: h.id, gpu: String(g.index) }, g.memoryBytes);
      },
    });
    deploymentStateGauge(this.registry, table);
    hostUpGauge(this.registry, this.sources.hosts);
    buildInfoGauge(this.registry, this.sources.build);
  }
}
