import { createServer } from 'node:net';

/** A free TCP port on 127.0.0.1. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** Whether `port` can be listened on at 127.0.0.1 now. */
function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/**
 * The first port from `first` to `last` (both included) that is free on 127.0.0.1 and not in
 * `held` (ports handed out whose holder may not have bound them yet); undefined when none is.
 */
export async function freePortIn(
  range: { first: number; last: number },
  held: ReadonlySet<number>,
): Promise<number | undefined> {
  for (let port = range.first; port <= range.last; port++) {
    if (!held.has(port) && (await canListen(port))) return port;
  }
  return undefined;
}
