/**
 * Host tokens over real processes: a server and two host agents. A host ID belongs to the token it
 * first registered with, and a host reports only its own instances (an engine exit, a load sample).
 */
import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Cluster, type ClusterHost } from './support/cluster.js';
import { simDeployment } from './support/lifecycle.js';

describe('host tokens, with a server and two host agents as processes', () => {
  let cluster: Cluster;
  let host1: ClusterHost;
  let host2: ClusterHost;
  // A listener of the caller's choosing: a taken-over host's requests would come here.
  let rogue: Server;
  let rogueUrl: string;
  let rogueRequests = 0;

  const registration = (hostId: string) => ({
    host_id: hostId,
    gpus: [{ index: 0, name: 'rogue-0', memory_bytes: 8 * 2 ** 30, memory_kind: 'discrete' }],
    host_ram_bytes: 2 ** 36,
    settings: {},
    ingress_url: rogueUrl,
  });

  beforeAll(async () => {
    rogue = createServer((_req, res) => {
      rogueRequests++;
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"stolen":true}');
    });
    await new Promise<void>((resolve) => rogue.listen(0, '127.0.0.1', resolve));
    rogueUrl = `http://127.0.0.1:${(rogue.address() as { port: number }).port}`;
    cluster = await Cluster.start({ hosts: [{}, {}] });
    [host1, host2] = cluster.hosts as [ClusterHost, ClusterHost];
    await cluster.deploy(simDeployment('on-one', 'vllm', [], `hosts: [${host1.hostId}]`));
    await cluster.deploy(simDeployment('on-two', 'vllm', [], `hosts: [${host2.hostId}]`));
  }, 180_000);

  afterAll(async () => {
    await cluster?.close();
    rogue?.close();
  });

  it('refuses a fresh token that registers a host already registered, and its models keep being served by it', async () => {
    expect((await cluster.chat('on-one')).status).toBe(200);
    const fresh = (await cluster.capyctl(['create', 'host-token'])).stdout.trim();

    const takeover = await cluster.api('POST', '/management/v1/hosts/register', registration(host1.hostId), fresh);
    expect(takeover.status).toBe(401);
    expect(takeover.body).toEqual({
      code: 'unauthorized',
      message: `host ${host1.hostId} is registered with another host token; to register it with a new one, an operator revokes the old one first (capyctl revoke host-token ${host1.hostId})`,
      retryable: false,
    });

    const answer = await cluster.chat('on-one');
    expect(answer.status).toBe(200);
    expect(answer.body.model).toBe('on-one');
    expect(rogueRequests).toBe(0);
    expect((await cluster.capyctl(['list', 'hosts'])).stdout).toContain(host1.hostId);
  }, 60_000);

  it('refuses a host token registering another host than the one it is bound to', async () => {
    const reply = await cluster.api('POST', '/management/v1/hosts/register', registration(host2.hostId), host1.token);
    expect(reply.status).toBe(401);
    expect(reply.body).toMatchObject({
      code: 'unauthorized',
      message: `this host token is bound to another host, not ${host2.hostId}; register ${host2.hostId} with a token of its own (capyctl create host-token)`,
    });
  });

  it('refuses an engine exit a host reports for another host’s model: the model stays ready and answers', async () => {
    expect((await cluster.chat('on-two')).status).toBe(200);
    const { deployment_id: id } = await cluster.status('on-two');
    const exit = { deployment_id: id, instance_index: 0, generation: 1, exit_code: 1, signal: null };

    const forged = await cluster.api('POST', `/management/v1/hosts/${host1.hostId}/engine-exits`, exit, host1.token);
    expect(forged.status).toBe(403);
    expect(forged.body).toEqual({
      code: 'forbidden',
      message: `host ${host1.hostId} may report only its own instances; instance ${id}/0 does not run on it`,
      retryable: false,
    });
    // Under the other host's name, host 1's token is no host token at all.
    expect(
      (await cluster.api('POST', `/management/v1/hosts/${host2.hostId}/engine-exits`, exit, host1.token)).status,
    ).toBe(401);

    const status = await cluster.status('on-two');
    expect(status).toMatchObject({ state: 'ready', hosts: [host2.hostId] });
    expect((await cluster.chat('on-two')).status).toBe(200);
  }, 60_000);

  it('refuses a load sample a host reports for another host’s model, as an engine exit: the board keeps the other host’s', async () => {
    expect((await cluster.chat('on-two')).status).toBe(200);
    const { deployment_id: id } = await cluster.status('on-two');
    const forgedLoad = { running: 900, waiting: 900, kv_usage_ppm: 900_000 };
    const sample = {
      sampled_at_ms: Date.now(),
      instances: [
        {
          deployment_id: id,
          instance_index: 0,
          generation: 1,
          ingress_in_flight: 900,
          engine: forgedLoad,
          max_running: { count: 8, source: 'engine' },
        },
      ],
    };

    const forged = await cluster.api('POST', `/management/v1/hosts/${host1.hostId}/samples`, sample, host1.token);
    expect(forged.status).toBe(403);
    expect(forged.body).toEqual({
      code: 'forbidden',
      message: `host ${host1.hostId} may report only its own instances; instance ${id}/0 does not run on it`,
      retryable: false,
    });
    // Its own (none here) are still its to report.
    const own = { sampled_at_ms: Date.now(), instances: [] };
    expect((await cluster.api('POST', `/management/v1/hosts/${host1.hostId}/samples`, own, host1.token)).status).toBe(
      204,
    );

    const load = await cluster.api('GET', `/management/v1/metrics/load?deployment=on-two`);
    expect(load.status).toBe(200);
    expect(load.body.deployments[0].instances).toEqual([
      expect.objectContaining({ host_id: host2.hostId, sample: expect.not.objectContaining({ engine: forgedLoad }) }),
    ]);
  }, 60_000);

  it('re-binds a host to a new token only after the operator revokes the old one', async () => {
    const revoked = await cluster.capyctl(['revoke', 'host-token', host1.hostId]);
    expect(revoked).toMatchObject({
      code: 0,
      stdout: `${host1.hostId}: host token revoked; a new one (capyctl create host-token) may register it\n`,
    });
    // The revoked token no longer speaks for the host.
    const sample = { sampled_at_ms: Date.now(), instances: [] };
    expect(
      (await cluster.api('POST', `/management/v1/hosts/${host1.hostId}/samples`, sample, host1.token)).status,
    ).toBe(401);

    const fresh = (await cluster.capyctl(['create', 'host-token'])).stdout.trim();
    const reply = await cluster.api('POST', '/management/v1/hosts/register', registration(host1.hostId), fresh);
    expect(reply.status).toBe(200);
    expect(reply.body).toMatchObject({ host_id: host1.hostId });

    const unknown = await cluster.capyctl(['revoke', 'host-token', 'no-such-host']);
    expect(unknown).toMatchObject({ code: 1, stderr: 'capyctl: not_found: host no-such-host not found\n' });
  }, 60_000);
});
