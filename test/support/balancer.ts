/**
 * One address in front of several servers, as a load balancer with health checks is: each request
 * goes to the first server that takes its connection, so one that died is passed over. Enough for
 * the host agents' calls to the management listener (small JSON bodies); a test balances the
 * inference requests itself.
 */
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Balancer {
  url: string;
  /** The servers' base URLs, tried in order; a test may add one. */
  upstreams: string[];
  close(): Promise<void>;
}

export async function startBalancer(upstreams: string[]): Promise<Balancer> {
  const server = createServer((incoming, reply) => {
    const chunks: Buffer[] = [];
    incoming.on('data', (c: Buffer) => chunks.push(c));
    incoming.on('end', () => {
      const body = Buffer.concat(chunks);
      const tryFrom = (i: number) => {
        if (i >= upstreams.length) {
          reply.writeHead(502).end();
          return;
        }
        const out = request(
          new URL(incoming.url ?? '/', upstreams[i]),
          { method: incoming.method, headers: incoming.headers },
          (answer) => {
            reply.writeHead(answer.statusCode ?? 502, answer.headers);
            answer.pipe(reply);
          },
        );
        // Refused before any answer: the next server. Cut after: the caller sees it cut, as behind a balancer.
        out.on('error', () => (reply.headersSent ? reply.destroy() : tryFrom(i + 1)));
        out.end(body);
      };
      tryFrom(0);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    upstreams,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
