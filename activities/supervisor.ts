/**
 * The engine processes of one host: started, watched and stopped here, nowhere else. An exit
 * nobody asked for is reported through `onUnexpectedExit`, unless the engine was still starting:
 * the start's own activity owns that exit (it fails the start, or launches the same generation
 * again when the engine lost the race for its port), and a report would mark the generation gone.
 */
import type { ChildProcess } from 'node:child_process';
import { createWriteStream, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { EngineAdapter, EngineEndpoint, LaunchPlan } from '../engines/engine.js';
import type { CheckedVersion } from '../engines/engineVersions.js';
import type { LaunchMemory } from '../engines/memoryBound.js';
import { spawnEndingWithThisProcess } from '../processes/endingWithThisProcess.js';
import type { ParkTier } from '../domain/vocabulary.js';
import type { DeploymentSpec } from '../settings/deploymentDocument.js';

/** One start of one instance's engine: a new generation is a new process. */
export interface InstanceKey {
  deploymentId: string;
  instanceIndex: number;
  generation: number;
}

/** An instance's place on the host, whichever generation runs there. */
export type InstanceSlot = Pick<InstanceKey, 'deploymentId' | 'instanceIndex'>;

/** Where an engine stands, as the host's own operations moved it. */
export type EngineStage = 'starting' | 'ready' | 'parking' | 'parked' | 'waking';

export interface EngineExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** The last of what the engine wrote on stderr, for the error a failed start or wake reports. */
  stderrTail: string;
}

export interface LaunchRequest {
  key: InstanceKey;
  spec: DeploymentSpec;
  adapter: EngineAdapter;
  /** The host's command for this engine, which the launch arguments followed. */
  command: readonly string[];
  plan: LaunchPlan;
  endpoint: EngineEndpoint;
  gpuIndexes: number[];
  /** The tier it parks at, chosen at launch; null when it stops instead. */
  parkTier: ParkTier | null;
  /** The GPU memory it was bounded to: a launch again (its port was taken) gets the same bound. */
  memory: LaunchMemory;
}

/** A launched engine: what it was launched with, and how it stands now. */
export interface SupervisedEngine extends LaunchRequest {
  stage: EngineStage;
  /** The tier its last park put it at (a vLLM chooses at each park); null before its first. */
  parkedTier: ParkTier | null;
  /** Its version as the start checked it, and what its parks and wakes send; absent until it is ready. */
  version?: CheckedVersion;
  process: ChildProcess;
  /** Resolves when the process has exited, for whatever reason. */
  exited: Promise<EngineExit>;
  /** Set once it has exited. */
  exit: EngineExit | undefined;
}

const TAIL_BYTES = 8_192;
const OUTPUT_DRAIN_MS = 1_000;
const slot = (k: InstanceSlot) => `${k.deploymentId}/${k.instanceIndex}`;
export const sameStart = (a: InstanceKey, b: InstanceKey) =>
  a.deploymentId === b.deploymentId && a.instanceIndex === b.instanceIndex && a.generation === b.generation;

export class EngineSupervisor {
  private readonly engines = new Map<string, SupervisedEngine>();
  private readonly stopping = new WeakSet<ChildProcess>();
  /**
   * The first generation this process launched in each slot. Generations only grow, and engines end
   * with their agent, so an older one ran under an agent of this host that is gone.
   */
  private readonly firstLaunched = new Map<string, number>();

  constructor(
    private readonly deps: {
      logDir: string;
      logger: Logger;
      onUnexpectedExit: (engine: SupervisedEngine, exit: EngineExit) => void;
    },
  ) {
    mkdirSync(deps.logDir, { recursive: true });
  }

  /** The engine an instance runs now, if any. */
  get(key: InstanceSlot): SupervisedEngine | undefined {
    return this.engines.get(slot(key));
  }

  /** The engine an instance runs now, unless it has exited: what requests may be forwarded to. */
  live(key: InstanceSlot): SupervisedEngine | undefined {
    const engine = this.get(key);
    return engine?.exit === undefined ? engine : undefined;
  }

  list(): SupervisedEngine[] {
    return [...this.engines.values()];
  }

  /** True when `key`'s generation was launched by this process (it may have ended since). */
  launchedHere(key: InstanceKey): boolean {
    const first = this.firstLaunched.get(slot(key));
    return first !== undefined && key.generation >= first;
  }

  /** Starts the engine of `key`; the same start asked again returns the one running (a retried activity). */
  launch(request: LaunchRequest): SupervisedEngine {
    const running = this.get(request.key);
    if (running && sameStart(running.key, request.key) && running.exit === undefined) return running;
    if (running && running.exit === undefined) {
      throw new Error(`instance ${slot(request.key)} already runs generation ${running.key.generation}; stop it first`);
    }
    const log = createWriteStream(
      join(this.deps.logDir, `${request.key.deploymentId}-${request.key.instanceIndex}.log`),
      { flags: 'a' },
    );
    const child = spawnEndingWithThisProcess(request.plan.argv, {
      env: { ...process.env, ...request.plan.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    // The log keeps both streams; the tail only stderr, where engines say why they stop.
    let tail = '';
    child.stdout!.on('data', (chunk: Buffer) => log.write(chunk));
    child.stderr!.on('data', (chunk: Buffer) => {
      log.write(chunk);
      tail = (tail + chunk.toString('utf8')).slice(-TAIL_BYTES);
    });

    const engine: SupervisedEngine = {
      ...request,
      stage: 'starting',
      parkedTier: null,
      process: child,
      exit: undefined,
      exited: new Promise<EngineExit>((resolve) => {
        const finish = (code: number | null, signal: NodeJS.Signals | null) => {
          const exit = { code, signal, stderrTail: tail };
          engine.exit = exit;
          log.end();
          resolve(exit);
        };
        child.once('error', (e) => {
          tail += `\n${e.message}`;
          finish(null, null);
        });
        // Its last words (why it exited) may still be in its pipes when 'exit' fires: read them
        // first, within a bound, since a worker it left behind may hold the pipes open.
        child.once('exit', (code, signal) => {
          const drained = Promise.all(
            [child.stdout!, child.stderr!].map((s) =>
              s.readableEnded ? undefined : new Promise((r) => s.once('end', r)),
            ),
          );
          void Promise.race([drained, sleep(OUTPUT_DRAIN_MS)]).then(() => finish(code, signal));
        });
      }),
    };
    void engine.exited.then((exit) => {
      if (engine.stage === 'starting') {
        this.deps.logger.warn(
          { ...request.key, code: exit.code, signal: exit.signal },
          'engine exited during its start',
        );
        return;
      }
      if (this.get(request.key) === engine && !this.stopping.has(child)) {
        this.engines.delete(slot(request.key));
        this.deps.logger.warn({ ...request.key, code: exit.code, signal: exit.signal }, 'engine exited unexpectedly');
        this.deps.onUnexpectedExit(engine, exit);
      }
    });
    this.engines.set(slot(request.key), engine);
    if (!this.firstLaunched.has(slot(request.key))) this.firstLaunched.set(slot(request.key), request.key.generation);
    this.deps.logger.info({ ...request.key, argv: request.plan.argv, pid: child.pid }, 'engine launched');
    return engine;
  }

  /**
   * Stops an instance's engine: SIGTERM, then SIGKILL after `graceMs`. Stopping one that is not
   * running (or a newer generation than asked) does nothing, so a retried stop is harmless.
   */
  async stop(key: InstanceKey, graceMs: number): Promise<void> {
    const engine = this.get(key);
    if (!engine || engine.key.generation > key.generation) return;
    this.stopping.add(engine.process);
    if (engine.exit === undefined) {
      engine.process.kill('SIGTERM');
      const killer = setTimeout(() => engine.process.kill('SIGKILL'), graceMs);
      await engine.exited;
      clearTimeout(killer);
    }
    if (this.get(key) === engine) this.engines.delete(slot(key));
    this.deps.logger.info({ ...engine.key }, 'engine stopped');
  }

  async stopAll(graceMs: number): Promise<void> {
    await Promise.all(this.list().map((e) => this.stop(e.key, graceMs)));
  }
}
