/**
 * The floor for bench/gatewayOverhead.ts: the least a Node.js proxy does for the same exchange,
 * with no routing, queue, validation or stream bounds. node:http takes the request, reads its body
 * and parses it as JSON (the gateway must read the model name), and undici relays it to the engine
 * and the answer back chunk by chunk, with backpressure. What the gateway adds beyond this is its
 * own; what this adds over the direct path is the hop itself on this machine.
 *
 * Run by the benchmark as its own process: `tsx bench/bareProxy.ts <engine base URL>`; it prints
 * `listening <port>` once it listens on 127.0.0.1.
 */
import { createServer } from 'node:http';
import { Pool } from 'undici';

const engine = process.argv[2];
if (!engine) throw new Error('usage: tsx bench/bareProxy.ts <engine base URL>');
const pool = new Pool(engine, { connections: 256, keepAliveTimeout: 30_000, bodyTimeout: 0, headersTimeout: 0 });

const server = createServer((req, res) => {
  const parts: Buffer[] = [];
  req.on('data', (part: Buffer) => parts.push(part));
  req.on('end', () => {
    const body = Buffer.concat(parts);
    JSON.parse(body.toString('utf8'));
    pool.dispatch(
      { method: 'POST', path: req.url!, headers: { 'content-type': 'application/json' }, body },
      {
        // undici takes a handler with this method for its controller-based interface.
        onRequestStart() {},
        onResponseStart(_, status, headers) {
          res.writeHead(status, { 'content-type': String(headers['content-type']) });
        },
        onResponseData(controller, chunk) {
          if (res.write(chunk)) return;
          controller.pause();
          res.once('drain', () => controller.resume());
        },
        onResponseEnd() {
          res.end();
        },
        onResponseError(_, error) {
          res.destroy(error);
        },
      },
    );
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => console.log(`listening ${(server.address() as { port: number }).port}`));
