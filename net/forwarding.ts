/**
 * What a proxy passes on of a message's headers. The host's ingress and the gateway's inference
 * listener both forward requests and replies unchanged but for these.
 */
import type { IncomingHttpHeaders } from 'node:http';

// Hop-by-hop headers are the connection's own, not the message's (RFC 9110 §7.6.1); `host` names the
// listener the client reached, not the one the proxy reaches.
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'transfer-encoding',
  'upgrade',
  'proxy-connection',
  'te',
  'trailer',
  'host',
]);

/** The headers without the hop-by-hop ones and those named in `drop` (lower case). */
export function forwardableHeaders(
  headers: IncomingHttpHeaders | Record<string, string | string[] | undefined>,
  drop: readonly string[] = [],
): Record<string, string | string[]> {
  const kept: Record<string, string | string[]> = {};
  for (const name in headers) {
    const value = headers[name];
    if (value !== undefined && !HOP_BY_HOP.has(name) && !drop.includes(name)) kept[name] = value;
  }
  return kept;
}
