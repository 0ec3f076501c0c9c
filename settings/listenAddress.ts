/**
 * A listener's "host:port" (settings/fields.ts `address`) as a socket is opened on it and a URL
 * names it: the one parser for the server's listeners and the host agent's ingress. An IPv6 host is
 * written in brackets ("[::1]:7443"); a socket wants it without them, a URL with them.
 */

export interface ListenAddress {
  /** Without brackets: what `listen()` takes. */
  host: string;
  port: number;
}

export function listenAddress(address: string): ListenAddress {
  const colon = address.lastIndexOf(':');
  const host = address.slice(0, colon);
  return {
    host: host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host,
    port: Number(address.slice(colon + 1)),
  };
}

/** Only this machine can reach a listener on it. */
export const isLoopback = (host: string): boolean => host === 'localhost' || host === '::1' || host.startsWith('127.');

/**
 * The host a URL names to reach a listener on `host` from this machine: a wildcard listener is
 * reached on loopback, and an IPv6 host is bracketed.
 */
export function urlHost(host: string): string {
  if (host === '0.0.0.0') return '127.0.0.1';
  if (host === '::') return '[::1]';
  return host.includes(':') ? `[${host}]` : host;
}
