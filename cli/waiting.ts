/**
 * How a command tells its operator what it waits for, on stderr (stdout is the receipt): on a
 * terminal one live line that counts the seconds and follows what it waits for; elsewhere a plain
 * line when it begins, one each time what it waits for changes, and one when it ends.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { ApiRefusal } from './failure.js';

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)}s`;

/** How often a command asks again while other models hold the memory it needs. */
const MEMORY_POLL_MS = 1_000;

/** Runs `work`, which may say (`update`) that what it waits for changed. */
export async function waitingFor<T>(what: string, work: (update: (what: string) => void) => Promise<T>): Promise<T> {
  const started = Date.now();
  const terminal = process.stderr.isTTY === true;
  const show = () => process.stderr.write(`\r\x1b[Kwaiting for ${what}… ${seconds(Date.now() - started)}`);
  const update = (now: string) => {
    if (now === what) return;
    what = now;
    if (terminal) show();
    else process.stderr.write(`waiting for ${what}\n`);
  };
  let ticker: NodeJS.Timeout | undefined;
  if (terminal) {
    show();
    ticker = setInterval(show, 1000);
  } else process.stderr.write(`waiting for ${what}\n`);
  try {
    return await work(update);
  } finally {
    clearInterval(ticker);
    process.stderr.write(`${terminal ? '\r\x1b[K' : ''}waited ${seconds(Date.now() - started)} for ${what}\n`);
  }
}

/** A command refused while other models hold the memory it needs: it may go once they free it. */
const memoryHeld = (e: unknown): e is ApiRefusal =>
  e instanceof ApiRefusal && e.code === 'insufficient_capacity' && e.retryable;

/** What a refusal says is held, and by whom: its first clause (`deployment … needs GPU memory held by …`). */
const heldBy = (name: string, e: ApiRefusal) => `GPU memory for ${name} (${e.apiMessage.split(';')[0]})`;

/**
 * `command`'s answer once the memory it needs is free: asked again each second while other models
 * hold it, each refusal's holders told to `update`. The server never queues it, so nothing acts
 * once the command is ended.
 */
export async function takenWhenMemoryFree<T>(
  name: string,
  command: () => Promise<T>,
  update: (what: string) => void,
): Promise<T> {
  for (;;) {
    try {
      return await command();
    } catch (e) {
      if (!memoryHeld(e)) throw e;
      update(heldBy(name, e));
    }
    await sleep(MEMORY_POLL_MS);
  }
}

/** The same, saying what it waits for once it must wait: the holders, as they change. */
export async function whenMemoryFree<T>(name: string, command: () => Promise<T>): Promise<T> {
  try {
    return await command();
  } catch (first) {
    if (!memoryHeld(first)) throw first;
    return waitingFor(heldBy(name, first), async (update) => {
      await sleep(MEMORY_POLL_MS);
      return takenWhenMemoryFree(name, command, update);
    });
  }
}
