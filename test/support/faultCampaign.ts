/**
 * The fault campaign (issue 18): a server, two host agents and a Temporal dev server, each its own
 * process; clients waiting for and streaming from several models; one of the three killed outright
 * (SIGKILL) at a phase of a switch read from the switch workflow's history, then started again. Per
 * case it counts what the clients saw (answered 200, answered with a retryable error of the
 * catalogue, cut by the kill, answered otherwise, never answered), what the requests sent the moment
 * the killed process was back came to, the deployments left in an in-between state a while after
 * recovery, and the GPU memory the simulator's ledger says is held by no instance.
 *
 * Host 1 runs the switches: `flip` parks in host RAM, `fresh` (residency: restart_only) stops and
 * starts, and the GPU holds one of them. Host 2 runs `steady`, streamed from throughout. Used by
 * test/faults.e2e.test.ts (one kill per case) and bench/faultCampaign.ts (each case ten times).
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client, Connection } from '@temporalio/client';
import type { temporal } from '@temporalio/proto';
import { request } from 'undici';
import { eventMs, stepOf } from '../../deploy/demo/switchHistory.js';
import { type DevServer, startDevServer } from '../../standalone/temporalDevServer.js';
import { freePort } from '../../processes/freePort.js';
import { gpuUsage } from '../../hostAgent/simulatedGpu.js';
import { Cluster, type ClusterHost } from './cluster.js';
import { simDeployment } from './lifecycle.js';

export const killables = ['server', 'host', 'temporal'] as const;
export type Killable = (typeof killables)[number];
/** The phases of a switch, in order; `after` is a switch that finished before the kill landed. */
export const phases = ['window', 'drain', 'park', 'wake', 'start', 'check', 'release', 'record'] as const;
export type Phase = (typeof phases)[number];
export type Seen = Phase | 'after';

export interface FaultCase {
  kill: Killable;
  phase: Phase;
}

/** What one request came to. `cut`: the process holding it was the one killed. */
export const answers = ['ok', 'retryable', 'cut', 'unexpected', 'lost'] as const;
export type Answer = (typeof answers)[number];

export interface CaseOutcome {
  case: FaultCase;
  /** The phase the switch was in when the kill landed, by its history. */
  hit: Seen;
  counts: Record<Answer, number>;
  /** Each answer that was not a 200, e.g. `unavailable`, `cut: other side closed`. */
  details: string[];
  /** Whether every request sent once the killed process was back and the switch it cut had settled was answered 200. */
  servedAfter: boolean;
  /**
   * The requests for the switch's target sent as soon as the killed process was back (a host agent:
   * registered again), while the switch it cut may still run: each must wait for a switch that can
   * serve it, not share the lost one's failure.
   */
  onReturn: Sent[];
  /** `name:state` of each deployment in an in-between state at the settle bound. */
  stuck: string[];
  /** GPU bytes the simulator's ledger shows held by an engine no instance in the catalogue accounts for. */
  leakedGpuBytes: number;
  ms: number;
}

export interface CampaignOptions {
  postgresAdminUrl: string;
  /** How long a client waits for an answer before it counts as never answered. */
  requestDeadlineMs: number;
  /** How long after recovery every deployment must have left its in-between state. */
  settleMs: number;
  log?: (line: string) => void;
}

/** The retryable errors a waiting request may get: the spec's "Errors while waiting", a failed wake's. */
const RETRYABLE_CODES = new Set(['unavailable', 'queue_full', 'wake_mismatch', 'wake_reload_failed', 'wake_uncertain']);
const IN_BETWEEN = new Set(['parking', 'waking', 'starting', 'stopping']);
/** States in which an instance holds GPU memory (the campaign's models park in host RAM). */
const ON_GPU = new Set(['ready', 'parking', 'waking', 'starting', 'stopping']);

/** Which phase a switch's activity belongs to; the in-between writes (`saveInstance`) belong to their step. */
const PHASE_OF: Readonly<Record<string, Phase>> = {
  closeAdmission: 'window',
  closeAdmissionThenRelease: 'window',
  awaitDrain: 'drain',
  withdrawVictims: 'drain',
  parkEngine: 'park',
  stopEngine: 'park',
  launchEngine: 'start',
  awaitEngineReady: 'start',
  wakeEngine: 'wake',
  probeEngine: 'check',
  recordWakeReference: 'check',
  startWaiters: 'release',
};
const RECORDS = new Set(['saveInstance', 'saveSwitchReceipt']);

/** Each phase lasts about this long (the simulator's park, wake, load and the wake check's 16 tokens). */
const PHASE_MS = 800;
const ADMISSION_WINDOW = '1s';
const INTO_THE_STEP: ReadonlySet<Phase> = new Set(['drain', 'wake', 'start', 'check']);
const VICTIM_FOR: Partial<Record<Phase, 'flip' | 'fresh'>> = {
  park: 'flip',
  start: 'flip',
  check: 'flip',
  wake: 'fresh',
};
/** A victim's stream outlasts the window, so the drain has work to wait for. */
const STREAM_TOKENS = 40;
const TOKENS_PER_S = 20;
const WAITERS = 6;
const STREAMS = 2;
const ON_RETURN = 3;

type Event = temporal.api.history.v1.IHistoryEvent;

/** The phase a switch's history shows at `atMs` (all of it when absent). */
export function phaseOf(events: readonly Event[], atMs = Infinity): Seen {
  let phase = -1;
  let waitersStarted = false;
  const scheduled = new Map<string, string>();
  // A wake scheduled beside the victims' parks or stops begins on the host once they ended.
  const victimSteps = new Set<string>();
  let wakeWaits = false;
  for (const e of events) {
    if (eventMs(e) > atMs) break;
    const closed =
      e.workflowExecutionCompletedEventAttributes ??
      e.workflowExecutionFailedEventAttributes ??
      e.workflowExecutionTerminatedEventAttributes ??
      e.workflowExecutionTimedOutEventAttributes ??
      e.workflowExecutionCanceledEventAttributes;
    if (closed) return 'after';
    // The park begins once the gateway has withdrawn the victims: their new requests wait.
    const done = e.activityTaskCompletedEventAttributes;
    if (done && scheduled.get(String(done.scheduledEventId)) === 'withdrawVictims')
      phase = Math.max(phase, phases.indexOf('park'));
    const ended = done ?? e.activityTaskFailedEventAttributes ?? e.activityTaskTimedOutEventAttributes;
    if (ended && victimSteps.delete(String(ended.scheduledEventId)) && victimSteps.size === 0 && wakeWaits)
      phase = Math.max(phase, phases.indexOf('wake'));
    // A local step (the waiters' start, the rows) shows as its marker once the task that ran it completed.
    const name = stepOf(e);
    if (!name) continue;
    scheduled.set(String(e.eventId), name);
    if (name === 'startWaiters') waitersStarted = true;
    if (e.activityTaskScheduledEventAttributes && (name === 'parkEngine' || name === 'stopEngine'))
      victimSteps.add(String(e.eventId));
    if (name === 'wakeEngine' && victimSteps.size > 0) {
      wakeWaits = true;
      continue;
    }
    const p = waitersStarted && RECORDS.has(name) ? 'record' : PHASE_OF[name];
    if (p) phase = Math.max(phase, phases.indexOf(p));
  }
  return phases[phase] ?? 'window';
}

export interface Sent {
  answer: Answer;
  detail?: string;
  /** From the request's send to its answer. */
  ms: number;
}

export class FaultCampaign {
  private temporal!: DevServer;
  private cluster!: Cluster;
  private switcher!: ClusterHost;
  private readonly dir = mkdtempSync(join(tmpdir(), 'capyctl-faults-'));
  private temporalPort = 0;

  private constructor(private readonly options: CampaignOptions) {}

  static async start(options: CampaignOptions): Promise<FaultCampaign> {
    const campaign = new FaultCampaign(options);
    try {
      await campaign.setUp();
    } catch (e) {
      await campaign.close();
      throw e;
    }
    return campaign;
  }

  private log(line: string) {
    this.options.log?.(line);
  }

  private async setUp() {
    this.temporalPort = await freePort();
    await this.startTemporal();
    const hostYaml = `resource_policy: { queue: { admission_window: ${ADMISSION_WINDOW} } }`;
    this.cluster = await Cluster.start({
      services: { temporalAddress: this.temporal.address, postgresAdminUrl: this.options.postgresAdminUrl },
      hosts: [{ yaml: hostYaml }, { yaml: hostYaml }],
    });
    const [one, two] = this.cluster.hosts as [ClusterHost, ClusterHost];
    this.switcher = one;
    const slow = [
      '--sim-park-ms',
      `${PHASE_MS}`,
      '--sim-wake-ms',
      `${PHASE_MS}`,
      '--sim-load-ms',
      `${PHASE_MS}`,
      '--sim-tokens-per-s',
      `${TOKENS_PER_S}`,
    ];
    await this.cluster.deploy(simDeployment('flip', 'vllm', slow, `hosts: ["${one.hostId}"]\n`));
    await this.cluster.deploy(
      simDeployment('fresh', 'vllm', slow, `hosts: ["${one.hostId}"]\nresidency: restart_only\n`),
    );
    await this.cluster.deploy(
      simDeployment('steady', 'vllm', ['--sim-tokens-per-s', `${TOKENS_PER_S}`], `hosts: ["${two.hostId}"]\n`),
    );
    for (const model of ['steady', 'flip']) await this.expectServed(model);
  }

  private async startTemporal() {
    // The dev server picks internal ports of its own, which another process may take meanwhile.
    for (let attempt = 1; ; attempt++) {
      try {
        this.temporal = await startDevServer({
          dbFile: join(this.dir, 'temporal.db'),
          logFile: join(this.dir, 'temporal.log'),
          port: this.temporalPort,
        });
        return;
      } catch (e) {
        if (attempt === 3) throw e;
      }
    }
  }

  private async expectServed(model: string) {
    const sent = await this.send(model, false);
    if (sent.answer !== 'ok') throw new Error(`${model} was not served while setting up: ${sent.detail}`);
  }

  /** Runs one case: sets the host up for it, makes a switch, kills, restarts, and counts. */
  async run(c: FaultCase): Promise<CaseOutcome> {
    const began = Date.now();
    // A park, a start and the check need `flip` loaded (it parks, `fresh` starts, and a start's
    // check is a step of its own: a wake checks within its step); a wake needs `fresh` loaded
    // (`flip` wakes); any other phase takes whichever is loaded.
    const needed = VICTIM_FOR[c.phase];
    let victim = await this.loadedOnSwitcher();
    if (needed && victim !== needed) {
      await this.expectServed(needed);
      victim = needed;
    }
    const target = victim === 'flip' ? 'fresh' : 'flip';
    await this.settled(this.options.settleMs);

    const requests: Array<Promise<Sent>> = [];
    const since = Date.now();
    for (let i = 0; i < STREAMS; i++) requests.push(this.send(victim, true));
    requests.push(this.send('steady', true));
    await sleep(150);
    for (let i = 0; i < WAITERS; i++) requests.push(this.send(target, false));

    const switchId = await this.switchSince(since);
    const killedAt = await this.killAt(switchId, c);
    await this.restart(c.kill);
    const onReturn = Array.from({ length: ON_RETURN }, () => this.send(target, false));
    const hit = await this.hitAt(switchId, killedAt);
    this.log(`${c.kill} killed during ${c.phase}: hit ${hit}`);

    // Once the switch the kill interrupted has finished, the next requests, one at a time: each
    // model served, the switches back and forth included. (A request that joins the waiters of a
    // switch that fails gets its retryable error with them.)
    await this.switchesFinished(this.options.settleMs);
    const stuckAtRecovery = await this.settled(this.options.settleMs);
    const after: Sent[] = [];
    for (const model of [target, victim, 'steady', target]) after.push(await this.send(model, false));
    const sent = [...(await Promise.all(requests)), ...after];
    const counts = Object.fromEntries(answers.map((a) => [a, sent.filter((s) => s.answer === a).length])) as Record<
      Answer,
      number
    >;
    const stuck = [...new Set([...stuckAtRecovery, ...(await this.settled(this.options.settleMs))])];
    return {
      case: c,
      hit,
      counts,
      details: sent.filter((s) => s.detail).map((s) => s.detail!),
      servedAfter: after.every((s) => s.answer === 'ok'),
      onReturn: await Promise.all(onReturn),
      stuck,
      leakedGpuBytes: await this.leakedGpuBytes(),
      ms: Date.now() - began,
    };
  }

  private async deployments(): Promise<any[]> {
    const reply = await this.cluster.api('GET', '/management/v1/deployments');
    if (reply.status !== 200) throw new Error(`list deployments answered ${reply.status}`);
    return reply.body.deployments;
  }

  private async loadedOnSwitcher(): Promise<'flip' | 'fresh'> {
    const ready = (await this.deployments()).find(
      (d) => (d.name === 'flip' || d.name === 'fresh') && d.state === 'ready',
    );
    if (ready) return ready.name;
    await this.expectServed('flip');
    return 'flip';
  }

  /** Waits up to `withinMs` for no deployment in an in-between state; returns those still in one. */
  private async settled(withinMs: number): Promise<string[]> {
    const deadline = Date.now() + withinMs;
    for (;;) {
      const stuck = (await this.deployments()).flatMap((d) =>
        d.instances.filter((i: any) => IN_BETWEEN.has(i.state)).map((i: any) => `${d.name}:${i.state}`),
      );
      if (stuck.length === 0 || Date.now() > deadline) return stuck;
      await sleep(250);
    }
  }

  /**
   * The bytes each host's simulated GPU holds for an engine the catalogue does not account for:
   * an engine of a deployment none of whose instances there is in a state that holds the GPU, or a
   * second engine of one that is.
   */
  private async leakedGpuBytes(): Promise<number> {
    const list = await this.deployments();
    let leaked = 0;
    for (const host of this.cluster.hosts) {
      const holders = new Set(
        list
          .filter((d) => d.instances.some((i: any) => i.host_id === host.hostId && ON_GPU.has(i.state)))
          .map((d) => d.name),
      );
      const seen = new Set<string>();
      for (const owner of (await gpuUsage(join(host.dataDir, 'sim-gpus'), 0)).owners) {
        const name = owner.label.replace(/^\S+ sim\//, '');
        if (owner.gpuBytes > 0 && (!holders.has(name) || seen.has(name))) leaked += owner.gpuBytes;
        seen.add(name);
      }
    }
    return leaked;
  }

  /** A chat completion, timed. */
  private async send(model: string, stream: boolean): Promise<Sent> {
    const began = Date.now();
    return { ...(await this.answerOf(model, stream)), ms: Date.now() - began };
  }

  /** What a chat completion came to; a stream counts as answered once it ends with `[DONE]`. */
  private async answerOf(model: string, stream: boolean): Promise<Omit<Sent, 'ms'>> {
    const body = { model, messages: [{ role: 'user', content: 'hi' }], max_tokens: stream ? STREAM_TOKENS : 4, stream };
    try {
      const reply = await request(`${this.cluster.inferenceUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(this.options.requestDeadlineMs),
      });
      const text = await reply.body.text();
      if (reply.statusCode === 200) {
        const whole = stream ? text.includes('data: [DONE]') : text.includes('"choices"');
        return whole ? { answer: 'ok' } : { answer: 'cut', detail: `cut: ${model} answer ended early` };
      }
      let error: { code?: unknown; message?: unknown } = {};
      try {
        error = JSON.parse(text);
      } catch {
        // Not the catalogue's JSON: unexpected below.
      }
      if (typeof error.code === 'string' && RETRYABLE_CODES.has(error.code))
        return { answer: 'retryable', detail: `${reply.statusCode} ${error.code}: ${error.message}` };
      return { answer: 'unexpected', detail: `${reply.statusCode} ${text.slice(0, 160)}` };
    } catch (e) {
      if ((e as Error).name === 'TimeoutError')
        return { answer: 'lost', detail: `lost: ${model} unanswered in ${this.options.requestDeadlineMs} ms` };
      return { answer: 'cut', detail: `cut: ${(e as Error).message}` };
    }
  }

  private async client<T>(use: (client: Client) => Promise<T>): Promise<T> {
    const connection = await Connection.connect({ address: this.temporal.address });
    try {
      return await use(new Client({ connection }));
    } finally {
      await connection.close();
    }
  }

  /** The switch on the switching host that began after `sinceMs`. */
  private switchSince(sinceMs: number): Promise<string> {
    const query = `WorkflowType = 'switchWorkflow' AND CapyHost = '${this.switcher.hostId}' AND StartTime >= '${new Date(sinceMs - 1_000).toISOString()}'`;
    return this.client(async (client) => {
      const deadline = Date.now() + 30_000;
      while (Date.now() < deadline) {
        for await (const w of client.workflow.list({ query })) return w.workflowId;
        await sleep(100);
      }
      throw new Error('no switch began on the switching host');
    });
  }

  /** Waits up to `withinMs` for no switch workflow to be running. */
  private switchesFinished(withinMs: number): Promise<void> {
    const query = `WorkflowType = 'switchWorkflow' AND ExecutionStatus = 'Running'`;
    return this.client(async (client) => {
      const deadline = Date.now() + withinMs;
      while ((await client.workflow.count(query)).count > 0 && Date.now() < deadline) await sleep(250);
    });
  }

  /** Follows the switch's history (long polls) until it reaches `c.phase`, then kills; returns when. */
  private killAt(workflowId: string, c: FaultCase): Promise<number> {
    const wanted = phases.indexOf(c.phase);
    return this.client(async (client) => {
      const events: Event[] = [];
      let nextPageToken: Uint8Array | undefined;
      for (;;) {
        const page = await client.workflowService.getWorkflowExecutionHistory({
          namespace: 'default',
          execution: { workflowId },
          waitNewEvent: true,
          ...(nextPageToken ? { nextPageToken } : {}),
        });
        events.push(...(page.history?.events ?? []));
        nextPageToken = page.nextPageToken?.length ? page.nextPageToken : undefined;
        const phase = phaseOf(events);
        if (phase === 'after' || phases.indexOf(phase) >= wanted) break;
      }
      // Into a step that lasts (the simulator's); at once where the phase is short (the window, which
      // counts from the scheduler's decision), begins with a quick step (the park: right after the
      // gateway withdrew the victims) or is one (the waiters' start, the record).
      if (INTO_THE_STEP.has(c.phase)) await sleep(PHASE_MS / 3);
      this.processOf(c.kill).kill('SIGKILL');
      return Date.now();
    });
  }

  private processOf(kill: Killable) {
    if (kill === 'server') return this.cluster.server.child;
    if (kill === 'host') return this.switcher.process.child;
    return this.temporal.process;
  }

  private async restart(kill: Killable) {
    if (kill === 'server') {
      await this.cluster.server.exited;
      await this.cluster.startServer();
    } else if (kill === 'host') {
      await this.switcher.process.exited;
      this.switcher.process = this.cluster.startAgent(this.switcher.file);
      await this.switcher.process.awaitOutput(`${this.switcher.hostId} to register again`, /"msg":"host (registered)"/);
    } else {
      await new Promise((resolve) =>
        this.temporal.process.exitCode !== null || this.temporal.process.signalCode !== null
          ? resolve(null)
          : this.temporal.process.once('exit', resolve),
      );
      await this.startTemporal();
    }
  }

  /** The phase the kill landed in, from the switch's history up to then. */
  private hitAt(workflowId: string, killedAtMs: number): Promise<Seen> {
    return this.client(async (client) => {
      const history = await client.workflow.getHandle(workflowId).fetchHistory();
      return phaseOf(history.events ?? [], killedAtMs);
    });
  }

  async close(): Promise<void> {
    await this.cluster?.close();
    await this.temporal?.stop();
  }
}

/** The cases × outcomes table, one row per case (several runs of a case add up in its row). */
export function faultTable(outcomes: readonly CaseOutcome[]): string {
  const rows = new Map<string, CaseOutcome[]>();
  for (const o of outcomes) {
    const key = `${o.case.kill} | ${o.case.phase}`;
    rows.set(key, [...(rows.get(key) ?? []), o]);
  }
  const lines = [
    '| killed | during | runs | kill landed in | 200 | retryable error | cut by the kill | other answer | never answered | next requests all 200 | stuck states | GPU bytes held by no instance |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
  ];
  for (const [key, runs] of rows) {
    const sum = (a: Answer) => runs.reduce((n, o) => n + o.counts[a], 0);
    const hits = new Map<string, number>();
    for (const o of runs) hits.set(o.hit, (hits.get(o.hit) ?? 0) + 1);
    const landed = [...hits].map(([h, n]) => (runs.length === 1 ? h : `${h} ×${n}`)).join(', ');
    const servedAfter = runs.filter((o) => o.servedAfter).length;
    const stuck = runs.reduce((n, o) => n + o.stuck.length, 0);
    const leaked = runs.reduce((n, o) => n + o.leakedGpuBytes, 0);
    lines.push(
      `| ${key} | ${runs.length} | ${landed} | ${sum('ok')} | ${sum('retryable')} | ${sum('cut')} | ${sum('unexpected')} | ${sum('lost')} | ${servedAfter}/${runs.length} | ${stuck} | ${leaked} |`,
    );
  }
  return lines.join('\n');
}
