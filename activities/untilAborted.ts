/** Waiting that ends when the activity step waiting is cancelled, though what it waits for goes on. */

/** `result`, or `signal`'s reason once it aborts first. */
export function untilAborted<T>(result: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const abort = () => reject(signal.reason);
    signal.addEventListener('abort', abort, { once: true });
    result.then(resolve, reject).finally(() => signal.removeEventListener('abort', abort));
  });
}
