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
import { DEFAULT_DATA_DIR } from '../domain/dataDir.js';
import { ADMIN_TOKEN_FILE } from '../standalone/adminToken.js';
import { ApiRefusal, failure } from './failure.js';

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

async function adminToken(flags: ConnectionFlags, env: NodeJS.ProcessEnv): Promise<string> {
  const given = flags['admin-token'] ?? env.CAPYCTL_ADMIN_TOKEN;
  if (given) return given;
  const file = resolve(flags['admin-token-file'] ?? env.CAPYCTL_ADMIN_TOKEN_FILE ?? DEFAULT_ADMIN_TOKEN_FILE);
  try {
    const token = readFileSync(file, 'utf8').trim();
    if (token) return token;
  } catch {
    // Said below, with every way to give the token.
  }
  throw await failure('noAdminToken', file);
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

/** How much of a body that is not capyctl's the one line shows. */
const FOUND_CHARS = 80;

/**
 * The management API's URL as given: `host:port` alone means http, as the listener settings write
 * it (`listen.management: 127.0.0.1:7443`); anything else must be an http(s) URL.
 */
async function serverUrl(given: string): Promise<string> {
  const written = /^[a-z][a-z0-9+.-]*:\/\//i.test(given) ? given : `http://${given}`;
  const url = URL.canParse(written) ? new URL(written) : undefined;
  if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:') || url.search || url.hash)
    throw await failure('invalidServer', given);
  return url.href.replace(/\/+$/, '');
}

/** What answered in capyctl's place, for the line that says so: its status, its type and how its body begins. */
function found(status: number, type: string | undefined, body: string): string {
  const start = body.replace(/\s+/g, ' ').trim();
  const shown = start.length > FOUND_CHARS ? `${start.slice(0, FOUND_CHARS)}…` : start;
  return `${status} ${type ?? 'without a content type'}${shown ? `: ${JSON.stringify(shown)}` : ', empty'}`;
}

/**
 * The body, if the management API could have written it: everything it answers is a JSON object,
 * and every refusal its `{code, message, retryable}`.
 */
function capyctlBody(status: number, type: string | undefined, body: string): Record<string, unknown> | undefined {
  let parsed: unknown;
  try {
    parsed = type !== undefined && /^application\/json\b/i.test(type) ? JSON.parse(body) : undefined;
  } catch {
    return undefined;
  }
  if (typeof parsed !== 'object' || parsed === null) return undefined;
  const { code, message } = parsed as Record<string, unknown>;
  return status < 400 || (typeof code === 'string' && typeof message === 'string')
    ? (parsed as Record<string, unknown>)
    : undefined;
}

/** The API's answer, or its refusal; any other body came from something else, which the line names. */
async function answerOf(url: string, request: string, reply: IncomingMessage, body: string): Promise<unknown> {
  const status = reply.statusCode ?? 0;
  const type = reply.headers['content-type'];
  const parsed = capyctlBody(status, type, body);
  if (parsed === undefined) throw await failure('notCapyctl', url, request, found(status, type, body));
  if (status < 400) return parsed;
  const { code, message, retryable } = parsed as { code: string; message: string; retryable?: unknown };
  const { apiErrors } = await import('../domain/catalogue.js');
  // capyctl's inference listener, or a host's ingress: a capyctl listener, not the management one.
  if (status === 404 && message === apiErrors.notFound('route', request).message)
    throw await failure('notManagementListener', url, request);
  throw new ApiRefusal(status, code, message, retryable === true);
}

export async function managementClient(
  flags: ConnectionFlags,
  env: NodeJS.ProcessEnv = process.env,
): Promise<ManagementClient> {
  const url = await serverUrl(flags.server ?? env.CAPYCTL_SERVER ?? DEFAULT_SERVER);
  const token = await adminToken(flags, env);
  return {
    url,
    async call<T>(method: 'GET' | 'POST' | 'DELETE', path: string, body?: unknown): Promise<T> {
      const target = new URL(`${url}/management/v1${path}`);
      const headers = {
        authorization: `Bearer ${token}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      };
      const unreachable = async (e: Error & { code?: string }) => {
        throw await failure('unreachable', url, e.code ?? e.message);
      };
      const reply = await exchange(
        target,
        method,
        headers,
        body === undefined ? undefined : JSON.stringify(body),
      ).catch(unreachable);
      const answer = await text(reply).catch(unreachable);
      return (await answerOf(url, `${method} ${target.pathname}${target.search}`, reply, answer)) as T;
    },
  };
}
