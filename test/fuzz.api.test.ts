/**
 * Bad input, swept: generated requests against a real `capyctl start server` process (management
 * and inference listeners over sockets), and generated documents of every kind against the settings
 * loader. Every answer to bad input is a 4xx with the catalogue's JSON, never a 5xx or a hang; the
 * process stays up; nothing already stored changes. Runs are bounded in count and seeded by
 * fast-check (a failure prints its seed and the smallest input that fails).
 */
import fc from 'fast-check';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { errorCodes } from '../domain/catalogue.js';
import { type DocumentKind, loadSettings, SettingsError } from '../settings/load.js';
import { Cluster, CLUSTER_ADMIN_TOKEN } from './support/cluster.js';

const RUNS = 400;
/** A request answered after this has hung, as far as a client can tell. */
const HANG_MS = 10_000;
const KEPT = ['kept-a', 'kept-b'];

/** Strings that have broken parsers and databases: NUL, controls, odd unicode, path-like names. */
const nasty = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.constantFrom(
    '\u0000',
    'a\u0000b',
    '../../etc/passwd',
    '..%2f..%2fetc',
    '%00',
    '\u202e',
    '\ud800',
    '😀'.repeat(50),
    'x'.repeat(5_000),
    ' ',
    '',
    '\n',
    'kept-a\u0000',
  ),
);
/** Values of every JSON type, at and past every range the documents have. */
const edgy = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }),
  nasty,
  fc.constantFrom(
    -1,
    0,
    1,
    2 ** 31,
    2 ** 53,
    -(2 ** 53),
    1e308,
    0.5,
    '1ms',
    '31s',
    '0s',
    '-5s',
    '99999h',
    '1TiB',
    '16GiB',
    'off',
    null,
    true,
    [],
    {},
  ),
);
/** A valid deployment document with one field set to something else, or an unknown key added. */
const mutatedDeployment = fc
  .record({
    key: fc.constantFrom(
      'name',
      'engine',
      'model',
      'extra_args',
      'hosts',
      'lifecycle',
      'residency',
      'max_concurrent_requests',
      'colour',
      '__proto__',
      'constructor',
    ),
    value: edgy,
    name: fc.stringMatching(/^fz-[a-z0-9]{1,10}$/),
  })
  .map(({ key, value, name }) => ({ name, engine: 'vllm', model: `sim/${name}`, [key]: value }));

/** What a test client sends: a JSON value, or raw bytes that may not be JSON at all. */
type Body = { json: unknown } | { raw: string };
const bodies: fc.Arbitrary<Body> = fc.oneof(
  mutatedDeployment.map((json) => ({ json })),
  fc.jsonValue({ maxDepth: 4 }).map((json) => ({ json })),
  fc.string({ unit: 'binary', maxLength: 200 }).map((raw) => ({ raw })),
  // Deep, but under the listener's body limit: a larger body is refused (413) before it is read,
  // and the client, still writing it, sees the connection close instead of the answer.
  fc.integer({ min: 1, max: 200_000 }).map((depth) => ({ raw: '['.repeat(depth) + ']'.repeat(depth) })),
  fc.integer({ min: 1, max: 150_000 }).map((depth) => ({ raw: '{"a":'.repeat(depth) + '1' + '}'.repeat(depth) })),
  fc.constantFrom(
    { raw: `{"name":"${'x'.repeat(900 * 1024)}"}` },
    { raw: '{"name":"a",}' },
    { raw: '' },
    { raw: 'null' },
    { raw: '\u0000' },
  ),
);

let tried = 0;
/** Names the documents created: a request for one of them waits for a host to serve it, as it should. */
const created = new Set<string>(KEPT);

describe('bad input against a real server process', () => {
  let cluster: Cluster;
  let kept: unknown;

  const send = async (
    url: string,
    method: 'GET' | 'POST' | 'DELETE',
    body: Body | undefined,
    headers: Record<string, string>,
  ) => {
    tried++;
    const payload = body === undefined ? undefined : 'json' in body ? (JSON.stringify(body.json) ?? 'null') : body.raw;
    const reply = await request(url, {
      method,
      headers: { ...headers, ...(payload === undefined ? {} : { 'content-type': 'application/json' }) },
      body: payload,
      headersTimeout: HANG_MS,
      bodyTimeout: HANG_MS,
    });
    return { status: reply.statusCode, text: await reply.body.text(), headers: reply.headers };
  };

  /** An answer a client of the spec can rely on: never a 5xx; an error is the catalogue's JSON. */
  const expectWellFormed = (what: string, reply: { status: number; text: string }) => {
    expect(reply.status, `${what} → ${reply.status} ${reply.text.slice(0, 300)}`).toBeLessThan(500);
    if (reply.status >= 400) {
      const body = JSON.parse(reply.text) as { code: string; message: string; retryable: boolean };
      expect(Object.keys(body).sort(), what).toEqual(['code', 'message', 'retryable']);
      expect(errorCodes.options, what).toContain(body.code);
      expect(body.message.length, what).toBeGreaterThan(0);
    }
  };

  beforeAll(async () => {
    cluster = await Cluster.start();
    for (const name of KEPT) {
      const reply = await cluster.api('POST', '/management/v1/deployments', {
        name,
        engine: 'vllm',
        model: `sim/${name}`,
      });
      expect(reply.status).toBe(201);
    }
    kept = await Promise.all(KEPT.map((name) => cluster.status(name)));
  }, 120_000);

  afterAll(async () => {
    await cluster?.close();
    // The count tried, for the record.
    console.info(`bad input: ${tried} requests tried against the server`);
  });

  const admin = { authorization: `Bearer ${CLUSTER_ADMIN_TOKEN}` };

  it('answers any deployment document with the catalogue: created, or a 4xx naming the problem', async () => {
    await fc.assert(
      fc.asyncProperty(bodies, async (body) => {
        const reply = await send(`${cluster.managementUrl}/management/v1/deployments`, 'POST', body, admin);
        expectWellFormed(`POST deployments ${JSON.stringify(body).slice(0, 200)}`, reply);
        if (reply.status < 300)
          created.add((JSON.parse(reply.text) as { deployment: { name: string } }).deployment.name);
      }),
      { numRuns: RUNS },
    );
  }, 240_000);

  it('answers any name or ID in a path with the catalogue, never a 5xx', async () => {
    const routes = [
      ['GET', '/management/v1/deployments/%s'],
      ['DELETE', '/management/v1/deployments/%s'],
      ['POST', '/management/v1/deployments/%s/start'],
      ['POST', '/management/v1/deployments/%s/park'],
      ['POST', '/management/v1/hosts/%s/drain'],
      ['POST', '/management/v1/hosts/%s/undrain'],
      ['DELETE', '/management/v1/hosts/%s/token'],
      ['GET', '/management/v1/metrics/load?deployment=%s'],
    ] as const;
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...routes), nasty, fc.boolean(), async ([method, template], name, raw) => {
        if (KEPT.some((k) => name === k)) return;
        // Raw: the bytes as a client may put them in a path, when the URL parser lets them through.
        // A lone surrogate has no UTF-8: a client sends it as U+FFFD.
        const segment =
          raw && /^[\x21-\x7e]*$/.test(name) && !/[?#/]/.test(name)
            ? name
            : encodeURIComponent(name.replace(/\p{Cs}/gu, '\u{fffd}'));
        const path = template.replace('%s', segment || '%20');
        expectWellFormed(
          `${method} ${path}`,
          await send(`${cluster.managementUrl}${path}`, method, method === 'POST' ? { json: {} } : undefined, admin),
        );
      }),
      { numRuns: RUNS },
    );
  }, 240_000);

  it('answers any inference request for no servable model with the catalogue', async () => {
    const inference = fc.oneof(
      bodies,
      fc
        .record({ model: fc.oneof(nasty, edgy), messages: edgy, max_tokens: edgy, stream: edgy })
        .map((json) => ({ json })),
    );
    await fc.assert(
      fc.asyncProperty(fc.constantFrom('/v1/chat/completions', '/v1/completions'), inference, async (path, body) => {
        // Only a string names a model; String() would throw on an object such as {toString: ""}.
        const model =
          'json' in body && typeof body.json === 'object' && body.json !== null
            ? (body.json as { model?: unknown }).model
            : undefined;
        fc.pre(!(typeof model === 'string' && created.has(model)));
        expectWellFormed(
          `POST ${path} ${JSON.stringify(body).slice(0, 200)}`,
          await send(`${cluster.inferenceUrl}${path}`, 'POST', body, {}),
        );
      }),
      { numRuns: RUNS },
    );
  }, 240_000);

  it('stays up, and what was stored before is unchanged', async () => {
    expect(cluster.server.running).toBe(true);
    expect(await Promise.all(KEPT.map((name) => cluster.status(name)))).toEqual(kept);
    expect(
      cluster.server
        .output()
        .split('\n')
        .filter((line) => line.includes('"msg":"unhandled error"')),
    ).toEqual([]);
  });
});

describe('bad documents of every kind', () => {
  const kinds: DocumentKind[] = ['deployment', 'host', 'server', 'standalone'];

  it('are refused with a SettingsError naming the problem, never another exception', () => {
    const documents = fc.oneof(
      fc.string({ unit: 'binary', maxLength: 300 }),
      fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v) ?? ''),
      fc
        .dictionary(
          fc.constantFrom(
            'name',
            'engine',
            'model',
            'id',
            'gpus',
            'listen',
            'server',
            'host',
            'switching',
            'ingress',
            'resource_policy',
            'zzz',
          ),
          edgy,
        )
        .map((d) => JSON.stringify(d)),
      fc.integer({ min: 1, max: 5_000 }).map((depth) => `${'- '.repeat(depth)}x`),
      fc.integer({ min: 1, max: 50_000 }).map((depth) => '['.repeat(depth) + ']'.repeat(depth)),
      fc.integer({ min: 1, max: 50_000 }).map((depth) => '{"a":'.repeat(depth) + '1' + '}'.repeat(depth)),
    );
    fc.assert(
      fc.property(fc.constantFrom(...kinds), documents, (kind, text) => {
        tried++;
        try {
          loadSettings(kind, { text, origin: 'fuzz.yaml' });
        } catch (e) {
          expect(e, `${kind}: ${text.slice(0, 200)}`).toBeInstanceOf(SettingsError);
          expect((e as Error).message).toMatch(/\S/);
        }
      }),
      { numRuns: 2 * RUNS },
    );
  }, 120_000);
});
