import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { commandIndex } from '../cli/commandIndex.js';
import { describe, expect, it } from 'vitest';
import { cannotParkReasons, hostBackedRefusals } from '../engines/rules.js';
import { apiErrors, engineSettingRefusals } from '../domain/catalogue.js';
import { CAPYCTL, capyctl } from './support/capyctl.js';

const dir = mkdtempSync(join(tmpdir(), 'capyctl-cli-'));
const file = (name: string, text: string) => {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
};

describe('capyctl settings check', () => {
  it('accepts the spec example and prints the effective settings as JSON', async () => {
    const path = file('standalone.yaml', 'host:\n  resource_policy:\n    queue:\n      request_deadline: "3600s"\n');
    const plain = await capyctl(['settings', 'check', 'standalone', '--file', path]);
    expect(plain).toEqual({ code: 0, stdout: `${path} over the embedded standalone defaults: valid\n`, stderr: '' });
    const json = await capyctl(['settings', 'check', 'standalone', '--file', path, '--json']);
    expect(JSON.parse(json.stdout).host.resource_policy.queue.request_deadline).toBe(3_600_000);
  });

  it('checks what a standalone start runs: the embedded defaults, which a file overrides field by field, and says what overrode them', async () => {
    const simulator = (engine: string) => [process.execPath, expect.stringMatching(/bin\/capyctl\.js$/), 'sim', engine];
    const embedded = await capyctl(['settings', 'check', 'standalone']);
    expect(embedded).toEqual({ code: 0, stdout: 'the embedded standalone defaults: valid\n', stderr: '' });
    const runs = JSON.parse((await capyctl(['settings', 'check', 'standalone', '--json'])).stdout);
    expect(runs).toMatchObject({
      examples: true,
      host: {
        gpus: [{ memory: 8 * 2 ** 30, memory_kind: 'discrete' }],
        engines: { vllm: { command: simulator('vllm') } },
      },
    });

    // A file without host.engines or host.gpus keeps the simulator and the simulated card.
    const path = file('no-engines.yaml', 'examples: false\nhost:\n  host_ram: 64GiB\n');
    const merged = JSON.parse((await capyctl(['settings', 'check', 'standalone', '--file', path, '--json'])).stdout);
    expect(merged).toMatchObject({
      examples: false,
      host: {
        host_ram: 64 * 2 ** 30,
        gpus: [{ memory: 8 * 2 ** 30 }],
        engines: { vllm: { command: simulator('vllm') }, sglang: { command: simulator('sglang') } },
      },
    });

    const overridden = await capyctl(
      ['settings', 'check', 'standalone', '--set', 'host.lifecycle.activation=explicit'],
      { CAPYCTL_SET__HOST__HOST_RAM: '8GiB' },
    );
    expect(overridden).toEqual({
      code: 0,
      stdout:
        'the embedded standalone defaults with CAPYCTL_SET__HOST__HOST_RAM, --set host.lifecycle.activation=explicit: valid\n',
      stderr: '',
    });
  });

  it('applies --set over the variable over the document in a real process', async () => {
    const path = file(
      'host.yaml',
      'server:\n  token: t\nresource_policy:\n  queue:\n    max_pending_per_deployment: 10\n',
    );
    const env = { CAPYCTL_SET__RESOURCE_POLICY__QUEUE__MAX_PENDING_PER_DEPLOYMENT: '20' };
    const read = async (sets: string[]) =>
      JSON.parse((await capyctl(['settings', 'check', 'host', '--file', path, '--json', ...sets], env)).stdout)
        .resource_policy.queue.max_pending_per_deployment;
    expect(await read([])).toBe(20);
    expect(await read(['--set', 'resource_policy.queue.max_pending_per_deployment=0'])).toBe(0);
  });

  it('refuses a bad document with exit code 2 and one line per problem', async () => {
    const path = file(
      'bad.yaml',
      'host:\n  resource_policy:\n    queue:\n      admission_window: 45s\n      colour: blue\n',
    );
    const result = await capyctl(['settings', 'check', 'standalone', '--file', path]);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toBe(
      `invalid standalone settings in ${path}:\n` +
        '  - host.resource_policy.queue.admission_window: 45s is out of range: allowed 1ms to 30s\n' +
        '  - host.resource_policy.queue.colour: unknown key\n',
    );
  });

  it("sets the standalone's Temporal dev server ports and a host's engine ports, refusing what cannot be a port or a range", async () => {
    const check = (kind: string, ...sets: string[]) =>
      capyctl(['settings', 'check', kind, '--json', ...sets.flatMap((set) => ['--set', set])]);
    const read = async (kind: string, ...sets: string[]) => JSON.parse((await check(kind, ...sets)).stdout);
    expect((await read('standalone')).temporal_dev_server).toEqual({ port: 7233, ui_port: 8233 });
    expect(
      (await read('standalone', 'temporal_dev_server.port=17233', 'temporal_dev_server.ui_port=18233'))
        .temporal_dev_server,
    ).toEqual({ port: 17233, ui_port: 18233 });
    expect((await read('standalone')).host.engine_ports).toBeUndefined();
    const ranged = await read('standalone', 'host.engine_ports.first=20000', 'host.engine_ports.last=20099');
    expect(ranged.host.engine_ports).toEqual({ first: 20000, last: 20099 });
    // One port is a range too.
    const one = await read('host', 'server.token=t', 'engine_ports.first=20000', 'engine_ports.last=20000');
    expect(one.engine_ports).toEqual({ first: 20000, last: 20000 });

    const refusals = [
      [
        ['standalone', 'temporal_dev_server.port=0'],
        'temporal_dev_server.port: 0 is out of range: allowed 1 to 65535 (from --set temporal_dev_server.port=0)',
      ],
      [
        ['standalone', 'temporal_dev_server.ui_port=7233'],
        'temporal_dev_server.ui_port: is the same as port: each needs its own (from --set temporal_dev_server.ui_port=7233)',
      ],
      [
        ['standalone', 'host.engine_ports.first=20100', 'host.engine_ports.last=20000'],
        'host.engine_ports.last: is below first: the range holds no port (both are included: first = last is one ' +
          'port) (from --set host.engine_ports.last=20000)',
      ],
      [['standalone', 'host.engine_ports.first=20000'], 'host.engine_ports.last: is required'],
      [
        ['host', 'server.token=t', 'engine_ports.first=20000', 'engine_ports.last=65536'],
        'engine_ports.last: 65536 is out of range: allowed 1 to 65535 (from --set engine_ports.last=65536)',
      ],
    ] as const;
    const results = await Promise.all(
      refusals.map(([[kind, ...sets]]) =>
        capyctl(['settings', 'check', kind, ...sets.flatMap((set) => ['--set', set])]),
      ),
    );
    expect(results).toEqual(
      refusals.map(([[kind], line]) => ({ code: 2, stdout: '', stderr: `invalid ${kind} settings:\n  - ${line}\n` })),
    );
  });

  it('refuses a deployment whose residency asks for a park its engine cannot give, as a deploy would', async () => {
    const cases = [
      [
        'gpt-oss.yaml',
        'name: gpt\nengine: vllm\nmodel: openai/gpt-oss-20b\nresidency: deep\n',
        apiErrors.capabilityMissingDeepPark('gpt', cannotParkReasons.gptOss),
      ],
      [
        'eagle.yaml',
        'name: eagle\nengine: sglang\nmodel: m\nresidency: host_backed\nextra_args: ["--speculative-algorithm", "EAGLE"]\n',
        apiErrors.invalidRequest(hostBackedRefusals.keepsWeights('eagle')),
      ],
    ] as const;
    const results = await Promise.all(
      cases.map(([name, text]) => capyctl(['settings', 'check', 'deployment', '--file', file(name, text)])),
    );
    expect(results).toEqual(
      cases.map(([name, , error]) => ({
        code: 2,
        stdout: '',
        stderr: `invalid deployment settings in ${join(dir, name)}:\n  - residency: ${error.code}: ${error.message}\n`,
      })),
    );
  });

  it('refuses an engine let sleep on its own, in a deployment or a host, and a host naming an unknown version', async () => {
    const deployment = file(
      'sleeper.yaml',
      'name: sleeper\nengine: vllm\nmodel: m\nextra_args: ["--sleep-idle-ttl", "60"]\n',
    );
    const host = file(
      'host.yaml',
      'server: { token: t }\nengines: { vllm: { command: [vllm, serve, --sleep-idle-ttl, "60"], ' +
        'unlisted_version_as: "0.40.0" } }\n',
    );
    const refused = apiErrors.invalidRequest(
      engineSettingRefusals.selfParkOption('deployment sleeper: its extra_args', '--sleep-idle-ttl', 'vLLM'),
    );
    expect(await capyctl(['settings', 'check', 'deployment', '--file', deployment])).toEqual({
      code: 2,
      stdout: '',
      stderr: `invalid deployment settings in ${deployment}:\n  - extra_args: ${refused.code}: ${refused.message}\n`,
    });
    const lines = [
      engineSettingRefusals.selfParkOption('engines.vllm.command', '--sleep-idle-ttl', 'vLLM'),
      engineSettingRefusals.unlistedAsUnknown(
        'engines.vllm.unlisted_version_as',
        '0.40.0',
        'vLLM',
        '0.10.1 up to (not including) 0.32.0',
      ),
    ];
    expect(await capyctl(['settings', 'check', 'host', '--file', host])).toEqual({
      code: 2,
      stdout: '',
      stderr: `invalid host settings in ${host}:\n${lines.map((l) => `  - ${l}\n`).join('')}`,
    });
  });

  it('shows help with an example, and refuses an unknown command', async () => {
    const help = await capyctl(['settings', 'check', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('example:\n  capyctl settings check standalone');
    const unknown = await capyctl(['frobnicate']);
    expect(unknown.code).toBe(2);
    expect(unknown).toMatchObject({
      stdout: '',
      stderr: 'capyctl: unknown command "frobnicate"; `capyctl --help` lists every command\n',
    });
  });

  it('ends quietly when the reader of its output goes away, as when piped into head', async () => {
    const child = spawn(process.execPath, [CAPYCTL, 'settings', 'check', 'standalone'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout.destroy();
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk));
    const [code] = (await once(child, 'close')) as [number];
    expect({ code, stderr }).toEqual({ code: 0, stderr: '' });
  });

  it('finds each command by the words it answers to, and lists them all in its help', async () => {
    const commands = await Promise.all(commandIndex.map(async (entry) => ({ entry, command: await entry.load() })));
    // Every command a file under cli/commands exports is in the index.
    const exported = (
      await Promise.all(
        readdirSync(new URL('../cli/commands/', import.meta.url)).map(async (file) =>
          Object.values(await import(`../cli/commands/${file.replace(/\.ts$/, '.js')}`)),
        ),
      )
    )
      .flat()
      .filter(
        (value): value is { words: string[] } =>
          typeof value === 'object' && value !== null && 'words' in value && 'run' in value,
      );
    expect(commands.map(({ command }) => command.words.join(' ')).sort()).toEqual(
      exported.map((c) => c.words.join(' ')).sort(),
    );
    for (const { entry, command } of commands) expect(command.words).toEqual(entry.words);
    const help = await capyctl(['--help']);
    expect(help.code).toBe(0);
    for (const { command } of commands)
      expect(help.stdout).toContain(`  ${command.words.join(' ').padEnd(26)} ${command.summary}\n`);
  });
});
