/**
 * Bad input, swept: generated requests against a real `capyctl start server` process (management
 * and inference listeners over sockets, a host agent serving one model), and generated documents of
 * every kind against the settings loader. Every answer to bad input is a 4xx with the catalogue's
 * JSON, never a 5xx or a hang; the process stays up; nothing already stored changes. Runs are bounded
 * in count and seeded by fast-check (a failure prints its seed and the smallest input that fails).
 *
 * The bodies are JSON text, not values, so that they can say what JSON.stringify never writes (1e400,
 * -0, 2^64 as digits, a key twice), and their shapes are put where a route reads them: a deep, wide or
 * extreme value as a field of a document the route would take, and sent to a model that is served.
 * (Deep nesting was once generated only as a whole body, which every route refuses at its first
 * level, and only to models that do not exist, which are refused before the body is written again:
 * a 5,000-level `messages` for a served model answered 500 while this sweep passed.)
 */
import fc from 'fast-check';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiErrors, errorCodes, renderApiError } from '../domain/catalogue.js';
import { INGRESS_PATHS } from '../domain/hostIngress.js';
import { MAX_NESTING } from '../domain/limits.js';
import { type DocumentKind, loadSettings, SettingsError } from '../settings/load.js';
import { buildAdminApp } from './support/adminApp.js';
import { Cluster, CLUSTER_ADMIN_TOKEN } from './support/cluster.js';
import { simDeployment } from './support/lifecycle.js';
import { routesOf } from './support/routes.js';

const RUNS = 400;
/** A request answered after this has hung, as far as a client can tell. */
const HANG_MS = 10_000;
const KEPT = ['kept-a', 'kept-b'];
/** The model the host serves; the issue's body names it. */
const SERVED = 'm';
/** The management listener's body limit: a generated body stays under it (see `bodies`). */
const MANAGEMENT_BODY_LIMIT = 1024 * 1024;

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
/** Numbers as JSON can spell them and a double cannot hold: past its range, -0, past 2^53 and 2^64, long. */
const extremeNumber = fc.constantFrom(
  '1e400',
  '-1e400',
  '1e-400',
  '-0',
  '-0.0',
  '0e0',
  '9007199254740993',
  '18446744073709551616',
  '-9223372036854775809',
  '1E+308',
  '123456789'.repeat(40),
  `0.${'1'.repeat(400)}`,
);
/** Levels of nesting: around the bound on each side, and far past it (the issue's body had 5,000). */
const depth = fc.oneof(
  fc.integer({ min: MAX_NESTING - 3, max: MAX_NESTING + 2 }),
  fc.integer({ min: 1, max: 100_000 }),
);
/** `levels` of arrays, objects (`{"a":…}`) or both in turn, around a leaf. */
const nested = fc
  .record({ levels: depth, kind: fc.constantFrom('array', 'object', 'mixed'), leaf: fc.constantFrom('1', '"x"', '') })
  .map(({ levels, kind, leaf }) => {
    if (kind === 'array') return '['.repeat(levels) + leaf + ']'.repeat(levels);
    if (kind === 'object') return '{"a":'.repeat(levels) + (leaf || '1') + '}'.repeat(levels);
    const pairs = Math.ceil(levels / 2);
    return '[{"a":'.repeat(pairs) + (leaf || '1') + '}]'.repeat(pairs);
  });
/** Wide: up to `most` keys (distinct, or one key again and again) or array items. */
const wideTo = (most: number) =>
  fc
    .record({ count: fc.integer({ min: 0, max: most }), shape: fc.constantFrom('keys', 'sameKey', 'items') })
    .map(({ count, shape }) => {
      const items = Array.from({ length: count }, (_, i) =>
        shape === 'items' ? String(i % 10) : `"${shape === 'keys' ? i.toString(36) : 'k'}":${i % 10}`,
      );
      return shape === 'items' ? `[${items.join(',')}]` : `{${items.join(',')}}`;
    });
/** Long strings, some of brackets, quotes and backslashes that a reader of the text must not count as nesting. */
const longString = fc
  .record({
    length: fc.integer({ min: 0, max: 200_000 }),
    unit: fc.constantFrom('x', '[', '{\\"a\\":', '\\"', '\\\\', 'é'),
  })
  .map(({ length, unit }) => `"${unit.repeat(Math.ceil(length / unit.length))}"`);
/** An object that says a key more than once: JSON.parse keeps the last. */
const duplicateKeys = fc
  .tuple(
    fc.constantFrom('a', 'model', 'name', 'messages', 'stream'),
    fc.array(fc.jsonValue({ maxDepth: 2 }), { minLength: 2, maxLength: 4 }),
  )
  .map(([key, values]) => `{${values.map((v) => `${JSON.stringify(key)}:${JSON.stringify(v)}`).join(',')}}`);
/**
 * Any value as JSON text: the documents' edges, and the widened shapes, up to `widest` keys or items.
 * A listener takes 100,000 keys under its body limit; the settings loader is held to fewer, as its
 * YAML parser's check for a key said twice takes time that grows as the square of the keys.
 */
const valueTextTo = (widest: number) =>
  fc.oneof(
    edgy.map((v) => JSON.stringify(v)),
    extremeNumber,
    nested,
    wideTo(widest),
    longString,
    duplicateKeys,
  );
const valueText = valueTextTo(100_000);
/** A JSON object's text: the given fields, then `key` set to `value` (a key said twice when it is one of them). */
const objectText = (fields: Record<string, unknown>, key: string, value: string) => {
  const pairs = Object.entries(fields).map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v)}`);
  return `{${[...pairs, `${JSON.stringify(key)}:${value}`].join(',')}}`;
};

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
    value: valueText,
    name: fc.stringMatching(/^fz-[a-z0-9]{1,10}$/),
  })
  .map(({ key, value, name }) => objectText({ name, engine: 'vllm', model: `sim/${name}` }, key, value));

/** What a test client sends: a JSON value, or raw bytes that may not be JSON at all. */
type Body = { json: unknown } | { raw: string };
const bodies: fc.Arbitrary<Body> = fc
  .oneof(
    mutatedDeployment.map((raw) => ({ raw })),
    fc.jsonValue({ maxDepth: 4 }).map((json) => ({ json })),
    fc.string({ unit: 'binary', maxLength: 200 }).map((raw) => ({ raw })),
    valueText.map((raw) => ({ raw })),
    fc.constantFrom(
      { raw: `{"name":"${'x'.repeat(900 * 1024)}"}` },
      { raw: '{"name":"a",}' },
      { raw: '' },
      { raw: 'null' },
      { raw: '\u0000' },
    ),
  )
  // A larger body is refused (413) before it is read, and the client, still writing it, sees the
  // connection close instead of the answer.
  .filter((body) => !('raw' in body) || Buffer.byteLength(body.raw) < MANAGEMENT_BODY_LIMIT);

/** A request the served model could answer, with one field set to a generated value (or a key added). */
const servedRequest: fc.Arbitrary<Body> = fc
  .record({
    key: fc.constantFrom(
      'messages',
      'prompt',
      'tools',
      'response_format',
      'stream',
      'stream_options',
      'max_tokens',
      'logit_bias',
      'model',
      'extra',
    ),
    value: valueText,
  })
  .map(({ key, value }) => ({
    raw: objectText(
      { model: SERVED, messages: [{ role: 'user', content: 'hi' }], prompt: 'hi', max_tokens: 1 },
      key,
      value,
    ),
  }));

let tried = 0;
/** Names the documents created: a request for one of them waits for a host to serve it, as it should. */
const created = new Set<string>([...KEPT, SERVED]);

/** The field `key` of a body, as the listener reads it (the last of a key said twice); undefined if none. */
function fieldOf(body: Body, key: 'model' | 'name'): unknown {
  let value: unknown;
  try {
    value = 'json' in body ? body.json : JSON.parse(body.raw);
  } catch {
    return undefined;
  }
  return typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[key] : undefined;
}
/** A name the sweep must not touch: what was stored before, and the model served, are compared at the end. */
const isProtected = (name: unknown) => typeof name === 'string' && (KEPT.includes(name) || name === SERVED);

/** `levels` of arrays as the issue's body nests them. */
const arrays = (levels: number) => '['.repeat(levels) + ']'.repeat(levels);
/** The issue's body: 10 KB, its `messages` 5,000 levels deep. */
const ISSUE_BODY = `{"model":"${SERVED}","messages":${arrays(5_000)}}`;

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
  /** What a request answered, in a failure's message: the body cut short. */
  const shown = (body: Body) => JSON.stringify(body).slice(0, 200);

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
    cluster = await Cluster.start({ hosts: [{}] });
    for (const name of KEPT) {
      const reply = await cluster.api('POST', '/management/v1/deployments', {
        name,
        engine: 'vllm',
        model: `sim/${name}`,
      });
      expect(reply.status).toBe(201);
    }
    // Fast enough that a request it answers costs the sweep milliseconds.
    await cluster.deploy(simDeployment(SERVED, 'vllm', ['--sim-tokens-per-s', '100000']));
    expect((await cluster.chat(SERVED)).status).toBe(200);
    kept = await Promise.all(KEPT.map((name) => cluster.status(name)));
  }, 120_000);

  afterAll(async () => {
    await cluster?.close();
    // The count tried, for the record.
    console.info(`bad input: ${tried} requests tried against the server`);
  });

  const admin = { authorization: `Bearer ${CLUSTER_ADMIN_TOKEN}` };
  const tooDeep = renderApiError(apiErrors.nestedTooDeep(MAX_NESTING)).body;

  it("refuses the issue's 5,000-level body 400 naming the limit, on every route of both listeners that takes a body", async () => {
    // The management listener's routes, read from its own route tree. A host's routes read the body
    // before they look at the token, an operator's take the admin token first: it is sent to all.
    const tree = await buildAdminApp(cluster.database.db, { adminToken: CLUSTER_ADMIN_TOKEN });
    const managementPosts = routesOf(tree).filter((r) => r.method === 'POST');
    await tree.close();
    expect(managementPosts.map((r) => r.url)).toContain('/management/v1/hosts/register');
    const targets = [
      ...[...INGRESS_PATHS].map((path) => ({ url: `${cluster.inferenceUrl}${path}`, headers: {} })),
      ...managementPosts.map((r) => ({
        url: `${cluster.managementUrl}${r.url.replace(/:\w+/g, 'nope')}`,
        headers: admin,
      })),
    ];
    for (const { url, headers } of targets) {
      const reply = await send(url, 'POST', { raw: ISSUE_BODY }, headers);
      expect({ url, status: reply.status, body: JSON.parse(reply.text) }).toEqual({ url, status: 400, body: tooDeep });
    }
  });

  it("refuses a host's registration whose settings nest past the bound, which the store could not write", async () => {
    const hostToken = { authorization: `Bearer ${(await cluster.capyctlOk(['create', 'host-token'])).trim()}` };
    const registration = {
      host_id: 'deep-host',
      gpus: [{ index: 0, name: 'sim-0', memory_bytes: 2 ** 33, memory_kind: 'discrete' }],
      host_ram_bytes: 2 ** 36,
      ingress_url: 'http://127.0.0.1:9',
    };
    const raw = objectText(registration, 'settings', `{"a":${arrays(5_000)}}`);
    const reply = await send(`${cluster.managementUrl}/management/v1/hosts/register`, 'POST', { raw }, hostToken);
    expect({ status: reply.status, body: JSON.parse(reply.text) }).toEqual({ status: 400, body: tooDeep });
  });

  it('takes a body nested to the bound, and refuses one level more', async () => {
    const nestedBody = (levels: number) =>
      `{"model":"${SERVED}","messages":[{"role":"user","content":"hi"}],"max_tokens":1,"x":${arrays(levels - 1)}}`;
    const at = await send(`${cluster.inferenceUrl}/v1/chat/completions`, 'POST', { raw: nestedBody(MAX_NESTING) }, {});
    expect(at.status, at.text).toBe(200);
    const past = await send(
      `${cluster.inferenceUrl}/v1/chat/completions`,
      'POST',
      { raw: nestedBody(MAX_NESTING + 1) },
      {},
    );
    expect({ status: past.status, body: JSON.parse(past.text) }).toEqual({ status: 400, body: tooDeep });
  });

  it('answers a wide body, huge numbers, long strings and keys said twice to the served model, never a 5xx', async () => {
    const chat = (field: string) =>
      `{"model":"${SERVED}","messages":[{"role":"user","content":"hi"}],"max_tokens":1,${field}}`;
    const keys = (n: number) => Array.from({ length: n }, (_, i) => `"k${i}":${i}`).join(',');
    const cases = [
      chat(keys(100_000)),
      chat(`"x":{${keys(100_000)}}`),
      chat(`"seed":1e400,"temperature":-0,"top_k":18446744073709551616,"x":[1e400,-1e400,-0,${'9'.repeat(400)}]`),
      chat(`"x":"${'['.repeat(500_000)}"`),
      `{"model":"${SERVED}","messages":[{"role":"user","content":"${'x'.repeat(200_000)}"}],"max_tokens":1}`,
      chat('"max_tokens":2,"max_tokens":1,"stream":true,"stream":false'),
      `{"model":"nope","messages":[],"model":"${SERVED}","messages":[{"role":"user","content":"hi"}],"max_tokens":1}`,
    ];
    for (const raw of cases) {
      const reply = await send(`${cluster.inferenceUrl}/v1/chat/completions`, 'POST', { raw }, {});
      expect(reply.status, `${raw.slice(0, 120)} → ${reply.status} ${reply.text.slice(0, 300)}`).toBeLessThan(500);
    }
  });

  it('answers any request for the served model with one field generated, never a 5xx', async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...INGRESS_PATHS), servedRequest, async (path, body) => {
        // A model named twice is the last one: another stored model would start, and move this one out.
        const model = fieldOf(body, 'model');
        fc.pre(model === SERVED || !(typeof model === 'string' && created.has(model)));
        const reply = await send(`${cluster.inferenceUrl}${path}`, 'POST', body, {});
        // The engine's own refusals come in its words, relayed; only the gateway's are the catalogue's.
        expect(reply.status, `POST ${path} ${shown(body)} → ${reply.status} ${reply.text.slice(0, 300)}`).toBeLessThan(
          500,
        );
      }),
      { numRuns: RUNS },
    );
  }, 240_000);

  it('answers any deployment document with the catalogue: created, or a 4xx naming the problem', async () => {
    await fc.assert(
      fc.asyncProperty(bodies, async (body) => {
        fc.pre(!isProtected(fieldOf(body, 'name')));
        const reply = await send(`${cluster.managementUrl}/management/v1/deployments`, 'POST', body, admin);
        expectWellFormed(`POST deployments ${shown(body)}`, reply);
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
        if (isProtected(name)) return;
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
        .record({
          model: fc.oneof(nasty, edgy),
          key: fc.constantFrom('messages', 'prompt', 'max_tokens', 'stream'),
          value: valueText,
        })
        .map(({ model, key, value }) => ({ raw: objectText({ model }, key, value) })),
    );
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...INGRESS_PATHS), inference, async (path, body) => {
        const model = fieldOf(body, 'model');
        fc.pre(!(typeof model === 'string' && created.has(model)));
        expectWellFormed(`POST ${path} ${shown(body)}`, await send(`${cluster.inferenceUrl}${path}`, 'POST', body, {}));
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
      fc
        .tuple(
          fc.constantFrom('name', 'max_concurrent_requests', 'gpus', 'listen', 'resource_policy', 'zzz'),
          valueTextTo(2_000),
        )
        .map(([key, value]) => `{${JSON.stringify(key)}:${value}}`),
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
