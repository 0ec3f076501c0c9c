/**
 * Requests the management API must answer as themselves, over real sockets to a `capyctl start
 * server` process: concurrent deploys of one new name, control characters in a path, two
 * Authorization headers. Each is a 4xx from the catalogue or a success, never a 500. And what the
 * process logs of a failure names the checkout's own files in its stack.
 */
import { existsSync, realpathSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../bin/sourceKey.js';
import { apiErrors } from '../domain/catalogue.js';
import { Cluster, CLUSTER_ADMIN_TOKEN } from './support/cluster.js';
import { getWithRepeatedHeader } from './support/repeatedHeaders.js';

const doc = (name: string, model = 'sim/one') => ({ name, engine: 'vllm', model });
const body = (e: { code: string; message: string; retryable: boolean }) => ({
  code: e.code,
  message: e.message,
  retryable: e.retryable,
});

describe('the management API, over a socket to a server process', () => {
  let cluster: Cluster;

  beforeAll(async () => {
    cluster = await Cluster.start();
  }, 120_000);
  afterAll(async () => {
    await cluster?.close();
  });

  it('takes concurrent deploys of one new name one after the other: one creates it, the same document again is unchanged', async () => {
    const replies = await Promise.all(
      Array.from({ length: 8 }, () => cluster.api('POST', '/management/v1/deployments', doc('same-doc'))),
    );
    expect(replies.map((r) => r.status).sort()).toEqual([200, 200, 200, 200, 200, 200, 200, 201]);
    expect(replies.map((r) => r.body.outcome).sort()).toEqual(['created', ...Array(7).fill('unchanged')]);
    expect(new Set(replies.map((r) => r.body.deployment.deployment_id)).size).toBe(1);
    expect((await cluster.status('same-doc')).revision).toBe(1);
  });

  it('takes concurrent deploys of one new name with different documents as one creation and a revision each', async () => {
    const replies = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        cluster.api('POST', '/management/v1/deployments', doc('many-docs', `sim/model-${i}`)),
      ),
    );
    expect(replies.map((r) => r.status).sort()).toEqual([200, 200, 200, 200, 200, 200, 200, 201]);
    expect(replies.map((r) => r.body.outcome).sort()).toEqual(['created', ...Array(7).fill('revised')]);
    expect(replies.map((r) => r.body.deployment.revision).sort()).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    expect((await cluster.status('many-docs')).revision).toBe(8);
  });

  it('refuses a control character in any path parameter 400, naming the parameter', async () => {
    const cases = [
      ['GET', '/management/v1/deployments/same%00doc', 'params.ref'],
      ['POST', '/management/v1/deployments/%00/start', 'params.ref'],
      ['DELETE', '/management/v1/deployments/same-doc%0A', 'params.ref'],
      ['POST', '/management/v1/hosts/gpu%00box/drain', 'params.hostId'],
      ['DELETE', '/management/v1/hosts/gpu%1Bbox/token', 'params.hostId'],
    ] as const;
    for (const [method, path, where] of cases) {
      const reply = await cluster.api(method, path, method === 'POST' ? {} : undefined);
      expect({ path, status: reply.status, body: reply.body }).toEqual({
        path,
        status: 400,
        body: body(apiErrors.controlCharacter(where)),
      });
    }
    // The deployment is still there to read by its name.
    expect((await cluster.api('GET', '/management/v1/deployments/same-doc')).status).toBe(200);
  });

  it('refuses a request with two Authorization headers 400, whichever of them holds the token', async () => {
    const send = (authorization: string[]) =>
      getWithRepeatedHeader(
        new URL('/management/v1/deployments', cluster.managementUrl).href,
        'authorization',
        authorization,
      );
    const admin = `Bearer ${CLUSTER_ADMIN_TOKEN}`;
    expect((await send([admin])).status).toBe(200);
    for (const pair of [
      [admin, 'Bearer wrong'],
      ['Bearer wrong', admin],
      [admin, admin],
    ]) {
      expect(await send(pair)).toEqual({ status: 400, body: body(apiErrors.repeatedHeader('Authorization')) });
    }
  });

  it("logs a failure's stack with the files of this checkout, as they are on disk", async () => {
    // The store refuses the server's heartbeat while its table of servers is away.
    await cluster.database.db.query('ALTER TABLE servers RENAME TO servers_away');
    let line: string;
    try {
      line = await cluster.server.awaitOutput(
        'a refused heartbeat',
        /^(.*"msg":"the store did not take this server's heartbeat".*)$/m,
        10_000,
      );
    } finally {
      await cluster.database.db.query('ALTER TABLE servers_away RENAME TO servers');
    }
    const stack = (JSON.parse(line) as { err: { stack: string } }).err.stack;
    // Every frame's file: `at fn (/path:line:column)`, `at /path:line:column`, or a file URL.
    const files = [...stack.matchAll(/^\s+at (?:.*\()?(?:file:\/\/)?(\/[^():]+):\d+:\d+\)?$/gm)].map((m) => m[1]!);
    // The sources, bundled into .cli/ and named through its source maps; a package's own files
    // where the checkout's node_modules puts them (a link, in a worktree).
    const sources = files.filter((f) => f.endsWith('.ts'));
    expect(sources.length, stack).toBeGreaterThan(0);
    const packages = realpathSync(join(PROJECT_ROOT, 'node_modules'));
    for (const file of files) {
      expect(existsSync(file), `${file} in\n${stack}`).toBe(true);
      expect(file.startsWith(file.endsWith('.ts') ? PROJECT_ROOT : packages), `${file} in\n${stack}`).toBe(true);
    }
  });
});
