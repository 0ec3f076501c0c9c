/** Polls `probe` until it gives a value, failing the test with what it waited for after `timeoutMs`. */
export async function until<T>(
  what: string,
  probe: () => T | undefined | Promise<T | undefined>,
  timeoutMs = 20_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** `reply`, or word that it did not come within `ms` (a waiter nobody releases would wait out its deadline). */
export async function within<T>(ms: number, reply: Promise<T>): Promise<T | string> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<string>((resolve) => (timer = setTimeout(resolve, ms, `no answer within ${ms} ms`)));
  try {
    return await Promise.race([reply, late]);
  } finally {
    clearTimeout(timer);
  }
}
