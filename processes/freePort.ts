import { createServer } from 'node:net';

/** Listens on `port` at 127.0.0.1 (0: any free one) and closes again: the port it had. */
function listenOnce(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      const { port: bound } = server.address() as { port: number };
      server.close(() => resolve(bound));
    });
  });
}

/** A free TCP port on 127.0.0.1. */
export const freePort = (): Promise<number> => listenOnce(0);

/**
 * The first port from `first` to `last` (both included) that is free on 127.0.0.1 and not in
 * `held` (ports handed out whose holder may not have bound them yet); undefined when none is.
 */
export async function freePortIn(
  range: { first: number; last: number },
  held: ReadonlySet<number>,
): Promise<number | undefined> {
  for (let port = range.first; port <= range.last; port++) {
    if (held.has(port)) continue;
    // Taken (EADDRINUSE), or not ours to take: the next one.
    const free = await listenOnce(port).catch(() => undefined);
    if (free !== undefined) return free;
  }
  return undefined;
}
