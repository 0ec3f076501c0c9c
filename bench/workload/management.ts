/**
 * What the benchmark asks capyctl's management API, as an operator's script would: deploy, start,
 * preinitialize, how each model stands, the latest switches, and whether anything still waits.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import type { ListedSwitchBody } from '../../api/switches.js';

export class ManagementError extends Error {
  override name = 'ManagementError';

  constructor(
    readonly status: number,
    readonly code: string | undefined,
    message: string,
  ) {
    super(message);
  }
}

export class Management {
  constructor(
    readonly url: string,
    private readonly token: string,
  ) {}

  async call<T = any>(method: 'GET' | 'POST', path: string, body?: unknown): Promise<T> {
    const reply = await request(`${this.url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${this.token}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await reply.body.text();
    const parsed = text === '' ? undefined : JSON.parse(text);
    if (reply.statusCode >= 300)
      throw new ManagementError(
        reply.statusCode,
        parsed?.code,
        `${method} ${path} answered ${reply.statusCode}: ${text}`,
      );
    return parsed as T;
  }

  /** Deploys a document and waits until its checkpoint is measured. */
  async deploy(document: Record<string, unknown>): Promise<void> {
    await this.call('POST', '/management/v1/deployments', document);
    await this.until(`${String(document.name)}'s checkpoint to be measured`, 60_000, async () => {
      const d = await this.call('GET', `/management/v1/deployments/${String(document.name)}`);
      return d.checkpoint === 'measured';
    });
  }

  state(name: string): Promise<string> {
    return this.call('GET', `/management/v1/deployments/${name}`).then((d) => d.state as string);
  }

  /**
   * A command that waits for memory is refused while other models hold it (`insufficient_capacity`,
   * retryable); asks again each half second, as `capyctl start` does.
   */
  async command(
    name: string,
    command: 'start' | 'preinitialize',
    timeoutMs: number,
    start = { evict: false },
  ): Promise<void> {
    const body = command === 'start' ? start : undefined;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      try {
        await this.call('POST', `/management/v1/deployments/${name}/${command}`, body);
        return;
      } catch (e) {
        if (!(e instanceof ManagementError) || e.code !== 'insufficient_capacity' || Date.now() > deadline) throw e;
        await sleep(500);
      }
    }
  }

  /** The latest switches (up to 100), newest first. */
  async switches(): Promise<ListedSwitchBody[]> {
    return (await this.call('GET', '/management/v1/switches?limit=100')).switches;
  }

  /** Nothing waits or runs in the gateway and no switch is under way. */
  async quiet(): Promise<boolean> {
    const [load, switches] = await Promise.all([this.call('GET', '/management/v1/metrics/load'), this.switches()]);
    const busy = (load.deployments as any[]).some((d) => d.router.waiting > 0 || d.router.in_flight > 0);
    return !busy && switches.every((s) => s.finished_at !== null);
  }

  async until(what: string, timeoutMs: number, check: () => Promise<boolean>): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
      await sleep(200);
    }
  }
}

/**
 * Collects every switch that begins from now on: the API lists the latest 100, so it is asked
 * every `everyMs` and the answers are merged by switch ID.
 */
export class SwitchWatch {
  private readonly seen = new Map<string, ListedSwitchBody>();
  private readonly since = Date.now();
  private timer: NodeJS.Timeout | undefined;
  private polling: Promise<void> = Promise.resolve();

  constructor(private readonly management: Management) {}

  start(everyMs: number): void {
    this.timer = setInterval(() => {
      this.polling = this.poll();
    }, everyMs);
  }

  private async poll(): Promise<void> {
    const listed = await this.management.switches().catch(() => []);
    for (const s of listed) if (Date.parse(s.started_at) >= this.since) this.seen.set(s.switch_id, s);
  }

  /** Stops watching; the switches, oldest first, once those still running ended (or `timeoutMs` passed). */
  async stop(timeoutMs: number): Promise<ListedSwitchBody[]> {
    clearInterval(this.timer);
    await this.polling;
    const deadline = Date.now() + timeoutMs;
    do {
      await this.poll();
      if ([...this.seen.values()].every((s) => s.finished_at !== null)) break;
      await sleep(200);
    } while (Date.now() < deadline);
    return [...this.seen.values()].sort((a, b) => Date.parse(a.started_at) - Date.parse(b.started_at));
  }
}
