/**
 * Two installations on one Temporal namespace (issue 33, item 1): two stores (two Postgres
 * databases) on the harness's dev server, and a host of the same ID in each. Workflow IDs are not
 * scoped to the installation, so `host-scheduler/<host>` is the first installation's, and stays
 * running on its task queue after it is gone (a reinstall on a fresh database). The second refuses
 * the host with one line naming both queues and what to do, and answers a request for a model only
 * that host may run at once, instead of signalling a scheduler no worker of its own polls (which
 * left the request to its 120 s deadline, with nothing logged). The line's `temporal workflow
 * terminate` is then run as printed: the host registers and serves. A standalone pointed at the same
 * Temporal with that host ID is refused the same way.
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parse as parseYaml } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveTemporalCli } from '../standalone/temporalDevServer.js';
import { storeId } from '../store/servers.js';
import { type ApiReply, type CapyProcess, Cluster, type ClusterHost } from './support/cluster.js';
import { simDeployment } from './support/lifecycle.js';
import { startStandaloneProcess, type StandaloneProcess } from './support/standalone.js';
import { until, within } from './support/until.js';

const HOST = `shared-${randomUUID().slice(0, 6)}`;
/** Both installations' servers keep the default's habit of one ID for all (`main`). */
const SERVER_ID = `main-${randomUUID().slice(0, 6)}`;

/** The identities of the workers that polled a queue's activity tasks lately, as `temporal task-queue describe` lists them. */
async function activityPollers(temporalAddress: string, taskQueue: string): Promise<string[]> {
  const { stdout } = await promisify(execFile)(await resolveTemporalCli(), [
    ...['task-queue', 'describe', '--address', temporalAddress, '--task-queue', taskQueue],
    ...['--task-queue-type', 'activity', '-o', 'json'],
  ]);
  return [...stdout.matchAll(/"identity":\s*"([^"]+)"/gi)].map((m) => m[1]!);
}

const identityOf = (server: CapyProcess) => `${server.child.pid}@${hostname()}`;
const serverQueueOf = (server: CapyProcess) =>
  server.awaitOutput('the server to start', /"taskQueue":"([^"]+)"[^\n]*"msg":"server started"/);

/** The refusal, word for word, as the catalogue writes it. */
const refusalLine = (theirs: string, ours: string, temporalAddress: string, host = HOST) =>
  `host ${host} is scheduled by another capyctl installation on this Temporal namespace (default): ` +
  `host-scheduler/${host} runs on task queue ${theirs}, not this installation's ${ours}; give the host another ` +
  `ID (id in its host document, host.id in a standalone's), or give this installation a Temporal namespace of ` +
  `its own (temporal.namespace in the server's and its hosts' documents, server.temporal.namespace in a ` +
  `standalone's), or, if the other installation is gone, end its scheduler with \`temporal workflow terminate ` +
  `--address ${temporalAddress} --namespace default -w host-scheduler/${host}\` and start this host again`;

/** How the host's agent ended its start: `exited <code>`, or `registered`. */
const agentOutcome = (host: ClusterHost) =>
  until(
    `${host.hostId}'s agent to exit or register`,
    () => {
      const agent = host.process;
      if (!agent.running) return `exited ${agent.child.exitCode}`;
      return /"msg":"host registered"/.test(agent.output()) ? 'registered' : undefined;
    },
    60_000,
  );

describe('two installations on one Temporal namespace, with a host of the same ID', () => {
  let first: Cluster;
  let second: Cluster;
  let firstQueue: string;
  let secondQueue: string;
  /** The second installation's refusal of the host. */
  let line: string;
  let standaloneDir: string | undefined;
  let standalone: StandaloneProcess | undefined;

  beforeAll(async () => {
    first = await Cluster.start({ hosts: [{ hostId: HOST }], serverId: SERVER_ID });
    firstQueue = `capyctl-workflows-${await storeId(first.database.db)}`;
  }, 120_000);

  afterAll(async () => {
    await standalone?.stop();
    await Promise.all([first?.close(), second?.close()]);
  });

  it("the second refuses the host with one line naming both installations' task queues and what to do", async () => {
    await first.deploy(simDeployment('chat'));
    expect((await first.chat('chat')).status).toBe(200);
    // The first installation is gone (a reinstall on a fresh database): its scheduler is not.
    await Promise.all(first.hosts.map((h) => h.process.stop()));
    await first.server.stop();

    second = await Cluster.start({ serverId: SERVER_ID });
    secondQueue = `capyctl-workflows-${await storeId(second.database.db)}`;
    line = refusalLine(firstQueue, secondQueue, second.services.temporalAddress);
    const host = await second.startHost({ hostId: HOST });
    expect(await agentOutcome(host)).toBe('exited 1');
    expect(host.process.output()).toContain(`capyctl: ${line}\n`);
    expect(second.server.output()).toContain(`"msg":"${line}"`);
  }, 120_000);

  it('the second answers a request for a model only that host may run at once, with the line', async () => {
    // Deployed while no host of its own may take it: its checkpoint waits for one.
    const deployed = await second.api('POST', '/management/v1/deployments', parseYaml(simDeployment('chat')));
    expect(deployed.status).toBeLessThan(300);
    const { deployment_id: deploymentId } = deployed.body.deployment;
    const startedAt = Date.now();
    const reply = await within(10_000, second.chat('chat'));
    if (typeof reply === 'string') throw new Error(`the request to the second installation: ${reply}`);
    expect(Date.now() - startedAt).toBeLessThan(5_000);
    expect({ status: reply.status, body: reply.body }).toEqual({
      status: 409,
      body: {
        code: 'host_of_another_installation',
        message: `deployment ${deploymentId} cannot be served here: ${line}`,
        retryable: false,
      },
    });
  }, 30_000);

  it("the line's `temporal workflow terminate`, run as printed, lets the host register and serve", async () => {
    const printed = /`(temporal workflow terminate [^`]+)`/.exec(second.hosts[0]!.process.output())?.[1];
    expect(printed).toBeDefined();
    const [, ...args] = printed!.split(' ');
    await promisify(execFile)(await resolveTemporalCli(), args);
    const [host] = second.hosts;
    host!.process = second.startAgent(host!.file);
    expect(await agentOutcome(host!)).toBe('registered');
    const reply = (await within(60_000, second.chat('chat'))) as ApiReply | string;
    expect(typeof reply === 'string' ? reply : reply.status).toBe(200);
  }, 90_000);

  it("the first, started again, refuses the host the second now schedules, and neither's gateway steps reach the other (one server ID)", async () => {
    await first.startServer();
    const [firstOwn, secondOwn] = await Promise.all([serverQueueOf(first.server), serverQueueOf(second.server)]);
    await until('the first server to poll its own queue', async () =>
      (await activityPollers(first.services.temporalAddress, firstOwn)).includes(identityOf(first.server))
        ? true
        : undefined,
    );
    expect(await activityPollers(second.services.temporalAddress, secondOwn)).not.toContain(identityOf(first.server));
    expect(first.server.output()).toContain(
      `"msg":"${refusalLine(secondQueue, firstQueue, first.services.temporalAddress)}"`,
    );
  }, 60_000);

  it('of two running installations, the first whose host registers takes it, before any request: the other is refused', async () => {
    const hostId = `fresh-${randomUUID().slice(0, 6)}`;
    expect(await agentOutcome(await first.startHost({ hostId }))).toBe('registered');
    const host = await second.startHost({ hostId });
    expect(await agentOutcome(host)).toBe('exited 1');
    expect(host.process.output()).toContain(
      `capyctl: ${refusalLine(firstQueue, secondQueue, second.services.temporalAddress, hostId)}\n`,
    );
  }, 120_000);

  it('a standalone on the same Temporal with that host ID is refused with the line, naming its own store', async () => {
    standaloneDir = mkdtempSync(join(tmpdir(), 'capyctl-installations-'));
    const starting = startStandaloneProcess({
      temporalAddress: second.services.temporalAddress,
      dir: standaloneDir,
      hostId: HOST,
    });
    const outcome = await starting.then(
      (s) => {
        standalone = s;
        return 'started';
      },
      (e: Error) => e.message,
    );
    expect(outcome).toMatch(/^the standalone exited with 1:/);
    const ownQueue = /not this installation's (capyctl-workflows-[0-9a-f-]{36});/.exec(outcome)?.[1];
    expect(ownQueue).toBeDefined();
    expect(ownQueue).not.toBe(secondQueue);
    expect(outcome).toContain(`capyctl: ${refusalLine(secondQueue, ownQueue!, second.services.temporalAddress)}\n`);
  }, 120_000);
});
