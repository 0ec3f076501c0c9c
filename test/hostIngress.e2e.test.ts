/**
 * A host's ingress takes the server's requests alone, and only for inference: a server and two host
 * agents as separate processes, each agent with the secret the server gave it at registration. A
 * request straight to an ingress would skip the gateway's queue limits, and an engine's control
 * routes (vLLM's `/sleep`) would park a model under the scheduler's feet.
 */
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiErrors, renderApiError } from '../domain/catalogue.js';
import { INGRESS_SECRET_HEADER } from '../domain/hostIngress.js';
import { ingressSecrets } from '../store/hosts.js';
import { Cluster, type ClusterHost } from './support/cluster.js';
import { simDeployment } from './support/lifecycle.js';

const chatBody = JSON.stringify({ model: 'chat-a', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 });

/** A request straight to a host's ingress, as anyone who reaches its port could send it. */
async function post(url: string, headers: Record<string, string>, body = chatBody) {
  const reply = await request(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body,
  });
  const text = await reply.body.text();
  const json = /json/.test(String(reply.headers['content-type']));
  return {
    status: reply.statusCode,
    contentType: reply.headers['content-type'],
    body: json ? (JSON.parse(text) as unknown) : text,
  };
}

describe("a host's ingress", () => {
  let cluster: Cluster;
  let runsIt: ClusterHost;
  let other: ClusterHost;
  let deploymentId: string;
  /** chat-a's instance on its host's ingress. */
  let instanceUrl: string;
  /** What the server holds for each host; a test reads it from the store, as nothing else shows it. */
  let secretOf: (host: ClusterHost) => Promise<string>;

  beforeAll(async () => {
    cluster = await Cluster.start({ hosts: [{}, {}] });
    [runsIt, other] = cluster.hosts as [ClusterHost, ClusterHost];
    ({ deployment_id: deploymentId } = await cluster.deploy(
      simDeployment('chat-a', 'vllm', [], `hosts: ["${runsIt.hostId}"]`),
    ));
    instanceUrl = `${await cluster.ingressUrl(runsIt)}/instances/${deploymentId}/0`;
    secretOf = async (host) => (await ingressSecrets(cluster.database.db)).get(host.hostId)!;
    // The model starts for its first request.
    expect((await cluster.chat('chat-a')).status).toBe(200);
  }, 120_000);

  afterAll(async () => {
    await cluster?.close();
  }, 60_000);

  it('answers 401 without the secret, with a wrong one, and with the other host’s', async () => {
    const refused = renderApiError(apiErrors.ingressUnauthorized());
    const sent: Array<Record<string, string>> = [
      {},
      { [INGRESS_SECRET_HEADER]: 'guessed' },
      { [INGRESS_SECRET_HEADER]: await secretOf(other) },
    ];
    for (const headers of sent) {
      for (const path of ['/v1/chat/completions', '/sleep?level=1']) {
        const reply = await post(`${instanceUrl}${path}`, headers);
        expect({ headers, path, status: reply.status, contentType: reply.contentType, body: reply.body }).toEqual({
          headers,
          path,
          status: 401,
          contentType: refused.headers['content-type'],
          body: refused.body,
        });
      }
    }
    expect(refused.body.message).toContain(`send ${INGRESS_SECRET_HEADER}:`);
  });

  it('forwards inference with its host’s secret, and no engine control route even with it', async () => {
    const secret = { [INGRESS_SECRET_HEADER]: await secretOf(runsIt) };
    const answered = await post(`${instanceUrl}/v1/chat/completions`, secret);
    expect(answered.status).toBe(200);
    expect(answered.body).toMatchObject({ object: 'chat.completion', model: 'chat-a' });

    for (const path of ['/sleep', '/wake_up', '/is_sleeping', '/sim/faults']) {
      const reply = await post(`${instanceUrl}${path}`, secret, '{}');
      expect({ path, status: reply.status, body: reply.body }).toEqual({
        path,
        status: 404,
        body: renderApiError(apiErrors.notFound('route', `POST /instances/${deploymentId}/0${path}`)).body,
      });
    }
    // The engine was not put to sleep: the model still answers, and is still listed ready.
    const chat = await cluster.chat('chat-a');
    expect(chat.status).toBe(200);
    expect(chat.body.choices[0].message.content.split(' ')).toHaveLength(4);
    expect((await cluster.status('chat-a')).state).toBe('ready');
  });

  it('is reached by the gateway, which sends the secret and never a client’s copy of it', async () => {
    const chat = await cluster.chat('chat-a', 4, { [INGRESS_SECRET_HEADER]: 'a-client-own-copy' });
    expect(chat.status).toBe(200);
    expect(chat.body).toMatchObject({ object: 'chat.completion', model: 'chat-a' });
  });

  it('is reached by a restarted server with the secret it kept', async () => {
    await cluster.server.stop();
    await cluster.startServer();
    const chat = await cluster.chat('chat-a');
    expect(chat.status).toBe(200);
    expect(chat.body).toMatchObject({ object: 'chat.completion', model: 'chat-a' });
  }, 60_000);
});
