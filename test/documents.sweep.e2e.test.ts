/**
 * Every field of every document survives what a user does with it: one document per optional field
 * and value, derived from the schemas themselves (test/support/fieldDocuments.ts), so a field added
 * later is covered without anyone remembering it. A deployment document goes through `capyctl deploy`,
 * the list (table and JSON), the status (human and JSON) and the load endpoint, against a server
 * and a host agent as processes; a host document is registered as its agent registers it and listed;
 * a document of every kind goes through `settings check`, as a person reads it and as JSON. (A declared `max_concurrent_requests` once answered 500 to every
 * list until its deployment was deleted.)
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import YAML from 'yaml';
import type { z } from 'zod';
import type { Command } from '../cli/command.js';
import { deployModel } from '../cli/commands/deployModel.js';
import { settingsCheck } from '../cli/commands/settingsCheck.js';
import { statusDeployment } from '../cli/commands/statusDeployment.js';
import { deleteDeployment } from '../cli/commands/deploymentCommands.js';
import type { HostBody } from '../api/hostAdmin.js';
import { discoverGpus } from '../hostAgent/gpus.js';
import { registrationOf } from '../hostAgent/registration.js';
import { deploymentDocument } from '../settings/deploymentDocument.js';
import { address, label } from '../settings/fields.js';
import { hostDocument } from '../settings/hostDocument.js';
import { metricsToken } from '../settings/serverDocument.js';
import { documentSchemas, loadSettings } from '../settings/load.js';
import { readableBytes } from '../cli/readable.js';
import { apiErrors } from '../domain/catalogue.js';
import { engineContracts } from '../engines/contracts.js';
import { cannotParkReasons } from '../engines/rules.js';
import { engineNames } from '../domain/vocabulary.js';
import { capyctl, type CliResult } from './support/capyctl.js';
import { Cluster, CLUSTER_ADMIN_TOKEN } from './support/cluster.js';
import { type FieldDocument, fieldDocuments } from './support/fieldDocuments.js';

const ULID = '[0-9A-HJKMNP-TV-Z]{26}';

/** The fields whose schema says what it takes only as a pattern: shared builders, so every field built on one is covered. */
const known = new Map<z.ZodType, unknown>([
  [label, 'gpu-box'],
  [address, '127.0.0.1:7233'],
  [metricsToken, 'capy_metrics_sweep_token'],
]);

/** An unlisted version runs as a listed one of its own engine: the first the contract table lists. */
const knownAt = new Map<string, unknown>(
  ['', 'host.'].flatMap((section) =>
    engineNames.options.map((engine) => [
      `${section}engines.${engine}.unlisted_version_as`,
      engineContracts[engine].versions[0]!.from,
    ]),
  ),
);

/**
 * A `capyctl` command run in this process, its output captured: a hundred documents as processes
 * would take minutes on two cores. The list runs as a process, over every document at once.
 */
async function inProcess(command: Command, args: readonly string[]): Promise<CliResult> {
  const out = vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
  const err = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
  try {
    const code = await command.run(args);
    const text = (spy: typeof out) => spy.mock.calls.map((c) => String(c[0])).join('');
    return { code, stdout: text(out), stderr: text(err) };
  } finally {
    out.mockRestore();
    err.mockRestore();
  }
}

const valueAt = (doc: unknown, path: string) =>
  path
    .split('.')
    .reduce<unknown>(
      (v, key) => (typeof v === 'object' && v !== null ? (v as Record<string, unknown>)[key] : undefined),
      doc,
    );

describe('every field of every document, derived from its schema', () => {
  let cluster: Cluster;
  beforeAll(async () => {
    cluster = await Cluster.start({ hosts: [{}] });
  }, 120_000);
  afterAll(async () => {
    await cluster?.close();
  });

  it('a deployment document with each optional field is deployed, listed, shown and read in the load, as it was read', async () => {
    const { documents } = fieldDocuments(deploymentDocument, known, knownAt);
    expect(documents.map((d) => d.field)).toEqual(
      expect.arrayContaining(['residency', 'max_concurrent_requests', 'lifecycle.activation', 'decision', 'hosts']),
    );
    const cases = documents.map((d, i) => {
      const document = { ...d.document, name: `field-${i}` };
      const text = YAML.stringify(document);
      return { ...d, name: `field-${i}`, text, spec: loadSettings('deployment', { text }) };
    });
    const described = (c: FieldDocument) => `${c.field}: ${JSON.stringify(c.value)}`;
    // The figure the load must show as declared is the one the document wrote, read by the loader.
    const declaring = cases.find((c) => c.field === 'max_concurrent_requests')!;
    expect(declaring.spec.max_concurrent_requests).toBe(declaring.value);

    const connection = () => ['--server', cluster.managementUrl, '--admin-token', CLUSTER_ADMIN_TOKEN];
    for (const c of cases) {
      const file = join(cluster.dir, `${c.name}.yaml`);
      writeFileSync(file, c.text);
      const r = await inProcess(deployModel, ['--file', file, ...connection()]);
      expect(r, described(c)).toMatchObject({ code: 0, stderr: '' });
      expect(r.stdout, described(c)).toMatch(new RegExp(`^${c.name}: created, revision 1 \\(deployment ${ULID}\\)`));
    }

    const listed = await cluster.capyctl(['list', 'deployments']);
    expect(listed).toMatchObject({ code: 0, stderr: '' });
    const rows = listed.stdout.trimEnd().split('\n');
    expect(rows[0]).toMatch(/^NAME +STATE +READY +REVISION +HOSTS$/);
    expect(
      rows
        .slice(1)
        .map((r) => r.split(/ +/)[0])
        .sort(),
    ).toEqual(cases.map((c) => c.name).sort());

    const json = await cluster.capyctl(['list', 'deployments', '--json']);
    expect(json).toMatchObject({ code: 0, stderr: '' });
    const byName = new Map((JSON.parse(json.stdout) as Array<{ name: string; spec: unknown }>).map((d) => [d.name, d]));
    for (const c of cases) expect(byName.get(c.name)?.spec, described(c)).toEqual(c.spec);

    for (const c of cases) {
      const shown = await cluster.api('GET', `/management/v1/deployments/${c.name}`);
      expect(shown, described(c)).toMatchObject({ status: 200, body: { name: c.name, spec: c.spec } });
      const status = await inProcess(statusDeployment, [c.name, ...connection()]);
      expect(status, described(c)).toMatchObject({ code: 0, stderr: '' });
      expect(status.stdout.split('\n')[1], described(c)).toMatch(new RegExp(`^${c.name} `));
      expect(status.stdout, described(c)).toContain(`\ndeployment_id: ${shown.body.deployment_id}\n`);
    }

    const load = await cluster.api('GET', '/management/v1/metrics/load');
    expect(load.status).toBe(200);
    const loaded = new Map(
      (load.body.deployments as Array<{ name: string; deployment_id: string; max_running: unknown }>).map((d) => [
        d.name,
        d,
      ]),
    );
    for (const c of cases) {
      const d = loaded.get(c.name);
      expect(d, described(c)).toBeDefined();
      // Spec, "Reading the load": a declared figure is shown as declared before any engine says.
      const declared = c.spec.max_concurrent_requests;
      expect(d!.max_running, described(c)).toEqual(
        declared === undefined ? { source: 'on_host' } : { count: declared, source: 'declared' },
      );
      // One model, by its name as by its ID.
      for (const ref of [c.name, d!.deployment_id]) {
        const one = await cluster.api('GET', `/management/v1/metrics/load?deployment=${ref}`);
        expect(one, described(c)).toMatchObject({
          status: 200,
          body: { deployments: [{ name: c.name, max_running: d!.max_running }] },
        });
      }
    }

    for (const c of cases)
      expect(await inProcess(deleteDeployment, [c.name, ...connection()]), described(c)).toEqual({
        code: 0,
        stdout: `${c.name}: deleted\n`,
        stderr: '',
      });
  }, 120_000);

  it('a host document with each optional field registers as its agent registers it, and is listed with its GPUs and host RAM', async () => {
    const { documents } = fieldDocuments(hostDocument, known, knownAt);
    const registered = [];
    for (const [i, d] of documents.entries()) {
      const settings = loadSettings('host', { text: YAML.stringify(d.document), env: {} });
      const token = (await cluster.api('POST', '/management/v1/host-tokens')).body.token as string;
      const body = registrationOf(`field-host-${i}`, settings, discoverGpus(settings).gpus, 'http://127.0.0.1:9');
      const what = `${d.field}: ${JSON.stringify(d.value)}`;
      expect(await cluster.api('POST', '/management/v1/hosts/register', body, token), what).toMatchObject({
        status: 200,
        body: { host_id: body.host_id },
      });
      registered.push({ what, body });
    }

    const json = await cluster.capyctl(['list', 'hosts', '--json']);
    expect(json).toMatchObject({ code: 0, stderr: '' });
    const listed = new Map((JSON.parse(json.stdout) as HostBody[]).map((h) => [h.host_id, h]));
    const table = await cluster.capyctl(['list', 'hosts']);
    expect(table).toMatchObject({ code: 0, stderr: '' });
    const rows = new Map(
      table.stdout
        .trimEnd()
        .split('\n')
        .slice(1)
        .map((row) => [row.split(/ {3,}/)[0], row.split(/ {3,}/)]),
    );
    for (const { what, body } of registered) {
      expect(listed.get(body.host_id), what).toMatchObject({ gpus: body.gpus, host_ram_bytes: body.host_ram_bytes });
      // Nothing runs there yet: each GPU shows 0B used of its memory.
      const gpus = body.gpus.map((g) => `0B/${readableBytes(g.memory_bytes)} ${g.memory_kind}`).join(', ') || '-';
      expect(rows.get(body.host_id)?.slice(0, 3), what).toEqual([
        body.host_id,
        gpus,
        readableBytes(body.host_ram_bytes),
      ]);
    }
  }, 120_000);

  it('a deployment document is refused what it owes, by settings check as a process and at deploy by the server: a repeated host or option, a model its engine cannot wake unless restart_only', async () => {
    const repeated = (name: string, rest: string, at: string) => ({
      name,
      rest,
      line: `${at} is already listed at index 0`,
      reply: {
        status: 400,
        body: { code: 'invalid_request', message: `body.${at} is already listed at index 0`, retryable: false },
      },
    });
    // The spec's list ("Some models cannot be woken correctly by their engine"), left to park by default.
    const unwakeable = [
      ['gpt-vllm', 'engine: vllm\nmodel: openai/gpt-oss-20b\n', cannotParkReasons.gptOss],
      ['gpt-sglang', 'engine: sglang\nmodel: openai/gpt-oss-120b\n', cannotParkReasons.gptOss],
      [
        'fp4-sglang',
        'engine: sglang\nmodel: meta/llama-70b\nextra_args: ["--quantization", "modelopt_fp4"]\n',
        cannotParkReasons.nvfp4OnSglang,
      ],
      ['vl-vllm', 'engine: vllm\nmodel: nvidia/Nemotron-3.5-Super-VL-FP8\n', cannotParkReasons.nemotronVlOnVllm],
    ] as const;
    const refused = [
      repeated('two-on-one', 'engine: vllm\nmodel: m\ninstances: 2\nhosts: [ov1, ov1]\n', 'hosts.1: ov1'),
      repeated('hundred', `engine: vllm\nmodel: m\nhosts: [${Array(100).fill('ov1').join(', ')}]\n`, 'hosts.1: ov1'),
      repeated(
        'same-option',
        'engine: vllm\nmodel: m\ndecision: {prompt: p, options: [y, n, y]}\n',
        'decision.options.2: y',
      ),
      ...unwakeable.map(([name, rest, reason]) => {
        const { status, code, message } = apiErrors.capabilityMissingDeepPark(name, reason);
        return {
          name,
          rest,
          line: `residency: ${code}: ${message}`,
          reply: { status, body: { code, message, retryable: false } },
        };
      }),
    ];
    const accepted = [
      ...unwakeable.map(([name, rest]) => ({ name: `${name}-restart`, rest: `${rest}residency: restart_only\n` })),
      // SGLang with speculative decoding keeps NVFP4 weights in memory: it may park.
      {
        name: 'fp4-eagle',
        rest: 'engine: sglang\nmodel: meta/llama-70b-nvfp4\nextra_args: ["--speculative-algorithm", "EAGLE"]\n',
      },
    ];
    const fileOf = (name: string) => join(cluster.dir, `owed-${name}.yaml`);
    const run = ({ name, rest }: { name: string; rest: string }) => {
      const text = `name: ${name}\n${rest}`;
      writeFileSync(fileOf(name), text);
      return Promise.all([
        capyctl(['settings', 'check', 'deployment', '--file', fileOf(name)]),
        cluster.api('POST', '/management/v1/deployments', YAML.parse(text)),
      ]);
    };
    const [refusals, acceptances] = await Promise.all([Promise.all(refused.map(run)), Promise.all(accepted.map(run))]);

    expect(refusals.map(([check, { status, body }]) => [check, { status, body }])).toEqual(
      refused.map((c) => [
        { code: 2, stdout: '', stderr: `invalid deployment settings in ${fileOf(c.name)}:\n  - ${c.line}\n` },
        c.reply,
      ]),
    );
    expect(acceptances.map(([check, { status, body }]) => [check, status, body.outcome])).toEqual(
      accepted.map((c) => [{ code: 0, stdout: `${fileOf(c.name)}: valid\n`, stderr: '' }, 201, 'created']),
    );
    const deleted = await Promise.all(
      accepted.map((c) => cluster.api('DELETE', `/management/v1/deployments/${c.name}`)),
    );
    expect(deleted.map((r) => r.status)).toEqual(accepted.map(() => 200));
  }, 60_000);

  it('a document of every kind with each optional field passes settings check, as a line and as JSON', async () => {
    const check = (args: string[]) => inProcess(settingsCheck, args);
    for (const kind of ['deployment', 'server', 'host', 'standalone'] as const) {
      const { documents } = fieldDocuments(documentSchemas[kind], known, knownAt);
      expect(documents.length).toBeGreaterThan(10);
      const optional = Object.entries(documentSchemas[kind].shape)
        .filter(([, field]) => field.safeParse(undefined).success)
        .map(([key]) => key);
      expect(
        documents.map((d) => d.field),
        `every top-level optional field of ${kind}`,
      ).toEqual(expect.arrayContaining(optional));
      for (const [i, d] of documents.entries()) {
        const file = join(cluster.dir, `${kind}-${i}.yaml`);
        writeFileSync(file, YAML.stringify(d.document));
        const what = `${kind} ${d.field}: ${JSON.stringify(d.value)}`;
        const line = await check([kind, '--file', file]);
        expect(line, what).toEqual({
          code: 0,
          stdout: expect.stringMatching(new RegExp(`^${file}( over the embedded standalone defaults)?: valid\\n$`)),
          stderr: '',
        });
        const json = await check([kind, '--file', file, '--json']);
        expect(json, what).toMatchObject({ code: 0, stderr: '' });
        // The field is there as read (a timer written `off` reads null).
        expect(valueAt(JSON.parse(json.stdout), d.field), what).toBeDefined();
        // A flag or a count reads back as written: a value the loader dropped would read as its default.
        if (typeof d.value === 'boolean' || typeof d.value === 'number')
          expect(valueAt(JSON.parse(json.stdout), d.field), what).toBe(d.value);
      }
    }
  });
});
