/**
 * Engine simulator processes for tests: `capyctl sim …` on a free port, as a host would launch an
 * engine, awaited until `GET /health` answers 200. Every process started here is tracked, so a
 * test file's `afterEach(stopSimulators)` leaves none behind.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { freePort } from '../../processes/freePort.js';
import type { SimState } from '../../simulator/engine.js';
import type { DialectName } from '../../engines/simulatorArgs.js';
import { CAPYCTL } from './capyctl.js';

/** Load, park, wake and reload in tens of milliseconds, 2,000 tokens a second: what the dialect tests run at. */
export const FAST_SIM_ARGS =
  '--sim-load-ms 50 --sim-park-ms 20 --sim-wake-ms 20 --sim-reload-ms 20 --sim-tokens-per-s 2000'.split(' ');
/** vLLM serves its sleep routes only in dev mode. */
export const VLLM_DEV_MODE = { VLLM_SERVER_DEV_MODE: '1' };

export interface SimulatorOptions {
  /** Added to this process's environment. */
  env?: Record<string, string>;
  /** The simulated GPU: sets CAPYCTL_SIM_GPU_DIR and CUDA_VISIBLE_DEVICES, to one device or to several in order. */
  gpu?: { dir: string; index: number } | { dir: string; indexes: readonly number[] };
  /** Await `GET /health` 200 (default), or return as soon as the process is spawned. */
  waitReady?: boolean;
  readyTimeoutMs?: number;
}

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface RunningSimulator {
  baseUrl: string;
  port: number;
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Settles when the process has exited. */
  exited: Promise<Exit>;
  /** `GET /sim/state`. */
  state(): Promise<SimState>;
  /** SIGTERM, then SIGKILL after 5 s; resolves with how it exited. */
  stop(): Promise<Exit>;
}

const started = new Set<RunningSimulator>();

/** Starts `capyctl sim DIALECT ARGS… --port <free>`; rejects with its stderr if it exits before it is ready. */
export async function startSimulator(
  dialect: DialectName,
  args: readonly string[],
  options: SimulatorOptions = {},
): Promise<RunningSimulator> {
  const port = await freePort();
  const env: NodeJS.ProcessEnv = { ...process.env, ...options.env };
  if (options.gpu) {
    env.CAPYCTL_SIM_GPU_DIR = options.gpu.dir;
    env.CUDA_VISIBLE_DEVICES = ('indexes' in options.gpu ? options.gpu.indexes : [options.gpu.index]).join(',');
  }
  const child = spawn(process.execPath, [CAPYCTL, 'sim', dialect, ...args, '--port', String(port)], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.setEncoding('utf8').on('data', (text: string) => (stdout += text));
  child.stderr!.setEncoding('utf8').on('data', (text: string) => (stderr += text));
  const exited = once(child, 'exit').then(([code, signal]) => ({ code, signal }) as Exit);
  const baseUrl = `http://127.0.0.1:${port}`;
  const sim: RunningSimulator = {
    baseUrl,
    port,
    child,
    stdout: () => stdout,
    stderr: () => stderr,
    exited,
    async state() {
      const res = await fetch(`${baseUrl}/sim/state`);
      return (await res.json()) as SimState;
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const killer = setTimeout(() => child.kill('SIGKILL'), 5_000);
        await exited;
        clearTimeout(killer);
      }
      started.delete(sim);
      return exited;
    },
  };
  started.add(sim);
  if (options.waitReady ?? true) await awaitHealthy(sim, options.readyTimeoutMs ?? 15_000);
  return sim;
}

/** Polls `GET /health` until 200; fails at once when the process exits. */
export async function awaitHealthy(sim: RunningSimulator, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let exit: Exit | undefined;
  void sim.exited.then((e) => (exit = e));
  while (Date.now() < deadline) {
    if (exit)
      throw new Error(`the simulator exited (${exit.code ?? exit.signal}) before it was ready:\n${sim.stderr()}`);
    const status = await fetch(`${sim.baseUrl}/health`).then(
      (res) => res.status,
      () => 0, // not listening yet
    );
    if (status === 200) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`the simulator at ${sim.baseUrl} was not healthy within ${timeoutMs} ms:\n${sim.stderr()}`);
}

/** Stops every simulator this helper started and has not stopped yet. */
export async function stopSimulators(): Promise<void> {
  await Promise.all([...started].map((sim) => sim.stop()));
}

/** POSTs JSON (or nothing) and returns the reply; the body is left to the caller. */
export function post(url: string, body?: unknown, signal?: AbortSignal): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal,
  });
}

/** A whole `text/event-stream` body as its `data:` payloads: JSON objects, and the final `[DONE]` as the string. */
export async function readEvents(res: Response): Promise<unknown[]> {
  const text = await res.text();
  return text
    .split('\n\n')
    .filter((frame) => frame !== '')
    .map((frame) => {
      if (!frame.startsWith('data: ')) throw new Error(`not an SSE data frame: ${JSON.stringify(frame)}`);
      const data = frame.slice('data: '.length);
      return data === '[DONE]' ? data : JSON.parse(data);
    });
}

/** Reads a stream's frames as they arrive, for tests about timing and cut-off streams. */
export async function* streamFrames(res: Response): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let buffer = '';
  for await (const chunk of res.body!) {
    buffer += decoder.decode(chunk as Uint8Array, { stream: true });
    let end: number;
    while ((end = buffer.indexOf('\n\n')) !== -1) {
      yield buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
    }
  }
}
