/**
 * `GET /` on the management listener: the status page (statusPage.html), one static file served
 * without a token. Its script asks for the admin token, keeps it in the tab's sessionStorage and
 * sends it as a bearer header to the operator's routes; the page itself holds no data.
 * This module sits one level below the root, as the page's path is made from its URL: the same in
 * the sources and in the CLI's build (bin/cliBundle.js).
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';

const PAGE_FILE = fileURLToPath(new URL('../gateway/statusPage.html', import.meta.url));

/** A CSP source allowing exactly the page's one inline `<tag>` block. */
function inlineHash(page: string, tag: 'script' | 'style'): string {
  const body = new RegExp(`<${tag}>([\\s\\S]*?)</${tag}>`).exec(page)?.[1];
  if (body === undefined) throw new Error(`${PAGE_FILE} has no <${tag}> block`);
  return `'sha256-${createHash('sha256').update(body).digest('base64')}'`;
}

export function statusPageRoute() {
  const page = readFileSync(PAGE_FILE, 'utf8');
  // Only the page's own script and style run, it talks only to this listener, and no other site frames it.
  const policy = [
    "default-src 'none'",
    `script-src ${inlineHash(page, 'script')}`,
    `style-src ${inlineHash(page, 'style')}`,
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
  return async (app: FastifyInstance) => {
    app.get('/', async (_request, reply) =>
      reply
        .type('text/html; charset=utf-8')
        .header('content-security-policy', policy)
        .header('x-content-type-options', 'nosniff')
        .header('cache-control', 'no-cache')
        .send(page),
    );
  };
}
