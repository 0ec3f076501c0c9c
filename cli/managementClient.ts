/**
 * How the operator's commands reach the management API: its URL (`--server`, CAPYCTL_SERVER, else
 * the default management listener) and the admin token (`--admin-token`, CAPYCTL_ADMIN_TOKEN, else
 * the file the standalone writes: `--admin-token-file`, CAPYCTL_ADMIN_TOKEN_FILE, else
 * `.data/admin-token` under the working directory).
 */
import { readFileSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { join, resolve } from 'node:path';
import { text } from 'node:stream/consumers';
import type { ErrorCode } from '../domain/catalogue.js';
import { DEFAULT_DATA_DIR } from '../domain/dataDir.js';
import { ADMIN_TOKEN_FILE } from '../standalone/adminToken.js';

export const DEFAULT_SERVER = 'http://127.0.0.1:7443';
/** Where the standalone writes its admin token, under its default data_dir. */
export const DEFAULT_ADMIN_TOKEN_FILE = join(DEFAULT_DATA_DIR, ADMIN_TOKEN_FILE);

/** The options every operator command takes, for `parseArgs`. */
export const connectionOptions = {
  server: { type: 'string' },
  'admin-token': { type: 'string' },
  'admin-token-file': { type: 'string' },
} as const;

export interface ConnectionFlags {
  server?: string;
  'admin-token'?: string;
  'admin-token-file'?: string;
}

/** A problem the operator fixes before the command can run (exit code 2). */
export class ConnectionSetupError extends Error {}

/** The API said no: its code and message, printed as one line. */
export class ApiRefusal extends Error {
  constructor(
    /** The HTTP status; 0 when the refusal did not come as one (unreachable, a followed switch that failed). */
    readonly status: number,
    readonly code: ErrorCode | string,
    readonly apiMessage: string,
    /** The same command may succeed later (the catalogue's `retryable`). */
    readonly retryable = false,
  ) {
    super(`${code}: ${apiMessage}`);
    this.name = 'ApiRefusal';
  }
}

function adminToken(flags: ConnectionFlags, env: NodeJS.ProcessEnv): string {
  const given = flags['admin-token'] ?? env.CAPYCTL_ADMIN_TOKEN;
  if (given) return given;
  const file = resolve(flags['admin-token-file'] ?? env.CAPYCTL_ADMIN_TOKEN_FILE ?? DEFAULT_ADMIN_TOKEN_FILE);
  try {
    const token = readFileSync(file, 'utf8').trim();
    if (token) return token;
  } catch {
    // Said below, with every way to give the token.
  }
  throw new ConnectionSetupError(
    `no admin token: pass --admin-token, set CAPYCTL_ADMIN_TOKEN, or point --admin-token-file ` +
      `(CAPYCTL_ADMIN_TOKEN_FILE) at the file the standalone writes; ${file} is missing or empty`,
  );
}

/**
 * One HTTP exchange with Node's own client, which sets no timeout: commands wait as long as the
 * lifecycle takes (a drain waits for what it stops, a preinitialize for its park). Not undici:
 * loading it took longer than a whole `capyctl list`.
 */
async function exchange(
  url: URL,
  method: string,
  headers: Record<string, string>,
  body: string | undefined,
): Promise<IncomingMessage> {
  const { request } = url.protocol === 'https:' ? await import('node:https') : await import('node:http');
  return new Promise((resolve, reject) => {
    const sent = request(url, { method, headers }, resolve);
    sent.once('error', reject);
    sent.end(body);
  });
}

export interface ManagementClient {
  readonly url: string;
  call<T>(method: 'GET' | 'POST' | 'DELETE', path: string, body?: unknown): Promise<T>;
}

export function managementClient(flags: ConnectionFlags, env: NodeJS.ProcessEnv = process.env): ManagementClient {
  const url = (flags.server ?? env.CAPYCTL_SERVER ?? DEFAULT_SERVER).replace(/\/+$/, '');
  const token = adminToken(flags, env);
  return {
    url,
    async call<T>(method: 'GET' | 'POST' | 'DELETE', path: string, body?: unknown): Promise<T> {
      const headers = {
        authorization: `Bearer ${token}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      };
      const unreachable = (e: Error & { code?: string }) => {
        throw new ApiRefusal(0, 'unreachable', `the management API at ${url} did not answer: ${e.code ?? e.message}`);
      };
      const reply = await exchange(
        new URL(`${url}/management/v1${path}`),
        method,
        headers,
        body === undefined ? undefined : JSON.stringify(body),
      ).catch(unreachable);
      const answer = await text(reply).catch(unreachable);
      const parsed = answer ? (JSON.parse(answer) as unknown) : undefined;
      const status = reply.statusCode ?? 0;
      if (status >= 400) {
        const error = parsed as { code?: string; message?: string; retryable?: boolean } | undefined;
        throw new ApiRefusal(
          status,
          error?.code ?? `http_${status}`,
          error?.message ?? answer,
          error?.retryable === true,
        );
      }
      return parsed as T;
    },
  };
}
