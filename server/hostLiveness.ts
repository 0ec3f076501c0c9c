/**
 * Which hosts the server may route to: a host agent reports its load about once a second, and that
 * report is its heartbeat. A host that said it is stopping, or has not reported for `downAfterMs`,
 * serves nothing new. The heartbeats are kept in memory and written to the store now and then
 * (`last_seen_at`), not once a second per host. An agent reports to one server; the others of the
 * store read its heartbeat there before they call it down.
 */
import type { Logger } from 'pino';
import type { HostState } from '../domain/vocabulary.js';

/** How often the server looks for hosts that stopped reporting: the agents' report period. */
const CHECK_MS = 1_000;
/**
 * How often a host's last heartbeat is written to the store, at most: a third of the bound when
 * that is less, so another server reading it never finds it older than the bound.
 */
const PERSIST_MS = 10_000;

export interface HostLivenessDeps {
  downAfterMs: number;
  /** Called once when a host is found down (it comes back by reporting or registering again). */
  onDown: (hostId: string) => Promise<void>;
  persistSeen: (hostId: string, at: Date) => Promise<void>;
  /** The host's last heartbeat as the store has it: what another server of the store heard. */
  storedSeen?: (hostId: string) => Promise<Date | undefined>;
  logger: Logger;
  now?: () => number;
}

export class HostLiveness {
  private readonly now: () => number;
  /** When each host last reported to this process. */
  private readonly heardMs = new Map<string, number>();
  /** When each host's silence began to count: its last report, or this server's start. */
  private readonly sinceMs = new Map<string, number>();
  private readonly persistedMs = new Map<string, number>();
  private readonly stopping = new Set<string>();
  private readonly down = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private checking: Promise<void> = Promise.resolve();

  constructor(private readonly deps: HostLivenessDeps) {
    this.now = deps.now ?? Date.now;
  }

  /** Hosts the store knows when the server starts: each has the whole bound to report again. */
  watch(hostIds: readonly string[]): void {
    for (const id of hostIds) this.sinceMs.set(id, this.now());
    this.timer = setInterval(() => {
      this.checking = this.checking.then(() => this.check());
    }, CHECK_MS);
  }

  /** A host another server of the store registered: its silence counts from now. */
  know(hostId: string): void {
    if (!this.sinceMs.has(hostId)) this.sinceMs.set(hostId, this.now());
  }

  /** A report arrived (a heartbeat); a host that was down serves again. */
  heard(hostId: string): void {
    const now = this.now();
    this.heardMs.set(hostId, now);
    this.sinceMs.set(hostId, now);
    if (this.down.delete(hostId)) this.deps.logger.info({ hostId }, 'host reports again');
  }

  /** The host (re)registered: a fresh agent, neither stopping nor down. */
  registered(hostId: string): void {
    this.stopping.delete(hostId);
    this.heard(hostId);
  }

  /** Its agent stops: its running answers finish, nothing new goes there. */
  markStopping(hostId: string): void {
    this.stopping.add(hostId);
  }

  /** Whether new requests and models may go to the host. */
  serves(hostId: string): boolean {
    return !this.down.has(hostId) && !this.stopping.has(hostId);
  }

  stateOf(hostId: string, draining: boolean): HostState {
    if (this.down.has(hostId)) return 'down';
    if (this.stopping.has(hostId)) return 'stopping';
    return draining ? 'draining' : 'ready';
  }

  /** The host's last report: the one this process heard, else the stored one. */
  lastSeenAt(hostId: string, stored: Date): Date {
    const heard = this.heardMs.get(hostId);
    return heard !== undefined && heard > stored.getTime() ? new Date(heard) : stored;
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.checking;
  }

  private async check(): Promise<void> {
    const now = this.now();
    for (const [hostId, since] of this.sinceMs) {
      if (now - since <= this.deps.downAfterMs) continue;
      const stored = (await this.deps.storedSeen?.(hostId).catch(() => undefined))?.getTime() ?? 0;
      if (now - stored <= this.deps.downAfterMs) {
        // It reports to another server.
        this.sinceMs.set(hostId, stored);
        if (this.down.delete(hostId)) this.deps.logger.info({ hostId }, 'host reports again');
        continue;
      }
      if (!this.down.has(hostId)) {
        this.down.add(hostId);
        this.deps.logger.warn(
          { hostId, silentMs: now - since },
          'host stopped reporting: shown down, nothing is routed to it',
        );
        await this.deps
          .onDown(hostId)
          .catch((e: unknown) =>
            this.deps.logger.error({ err: e, hostId }, 'could not take a down host out of service'),
          );
      }
    }
    for (const [hostId, heard] of this.heardMs) {
      const persisted = this.persistedMs.get(hostId) ?? 0;
      // A host found down has its last report written at once: it may be the last one.
      const every = Math.min(PERSIST_MS, this.deps.downAfterMs / 3);
      if (heard === persisted || (heard - persisted < every && !this.down.has(hostId))) continue;
      this.persistedMs.set(hostId, heard);
      await this.deps
        .persistSeen(hostId, new Date(heard))
        .catch((e: unknown) =>
          this.deps.logger.warn({ err: e, hostId }, 'could not record when the host was last seen'),
        );
    }
  }
}
