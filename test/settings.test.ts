import { describe, expect, it } from 'vitest';
import { RUNNING_PER_MODEL } from '../domain/limits.js';
import { loadSettings, SettingsError, type DocumentKind } from '../settings/load.js';
import { tightestOfHosts } from '../settings/queue.js';
import { parseBytes, parseDuration } from '../settings/units.js';

const MiB = 2 ** 20;
const HOST_TOKEN = 'server:\n  token: capy_host_test\n';

/** The problems a document is refused with; fails the test when it is accepted. */
function refusal(kind: DocumentKind, text: string, sets: string[] = [], env: NodeJS.ProcessEnv = {}): string[] {
  try {
    loadSettings(kind, { text, sets, env, origin: `${kind}.yaml` });
  } catch (e) {
    expect(e).toBeInstanceOf(SettingsError);
    return [...(e as SettingsError).problems];
  }
  throw new Error(`expected ${kind} document to be refused:\n${text}`);
}

/** A YAML document that sets one dotted path. */
function yamlAt(path: string, value: string): string {
  const keys = path.split('.');
  return keys.map((k, i) => `${'  '.repeat(i)}${k}:${i === keys.length - 1 ? ` ${value}` : ''}`).join('\n') + '\n';
}

describe('defaults (spec, "Settings")', () => {
  it('gives a standalone every default of the Settings table', () => {
    const s = loadSettings('standalone', { env: {} });
    expect(s.host.resource_policy.queue).toEqual({
      admission_window: 2_000,
      request_deadline: 1_800_000,
      stream_idle_timeout: 120_000,
      max_pending_per_deployment: 64,
      max_pending_total: 256,
      max_buffered_bytes_total: 64 * MiB,
    });
    expect(s.server.switching.drain_timeout).toBe(30_000);
    expect(s.server.lifecycle_defaults).toEqual({ ready_idle_timeout: null, parked_idle_timeout: null });
    expect(s.host.lifecycle.activation).toBe('on_demand');
    expect(s.server.temporal.address).toBeUndefined();
    expect(RUNNING_PER_MODEL).toBe(32);
  });

  it('gives a host 600 s of request deadline and a server 30 s of drain', () => {
    const host = loadSettings('host', { text: HOST_TOKEN, env: {} });
    expect(host.resource_policy.queue.request_deadline).toBe(600_000);
    expect(host.resource_policy.queue.admission_window).toBe(2_000);
    expect(host.resource_policy.queue.max_pending_per_deployment).toBe(64);
    const server = loadSettings('server', { env: {} });
    expect(server.switching.drain_timeout).toBe(30_000);
    expect(server.temporal.address).toBe('127.0.0.1:7233');
    expect(server.listen.management).toBe('127.0.0.1:7443');
  });

  it("listens for the server's requests to a host's engines on loopback unless told otherwise", () => {
    expect(loadSettings('host', { text: HOST_TOKEN, env: {} }).ingress).toEqual({ listen: '127.0.0.1:7080' });
  });

  it('reads a deployment with its lifecycle defaults', () => {
    const d = loadSettings('deployment', { text: 'name: my-model\nengine: vllm\nmodel: Qwen3-4B\n' });
    expect(d).toEqual({
      name: 'my-model',
      engine: 'vllm',
      model: 'Qwen3-4B',
      extra_args: [],
      lifecycle: { activation: 'on_demand', warm: false },
    });
  });
});

/** Each row: a standalone path, both ends of its range as written, one step outside each, and the range the refusal names. */
const ranges: Array<[path: string, low: string, high: string, below: string, above: string, range: string]> = [
  ['host.resource_policy.queue.admission_window', '1ms', '30s', '0ms', '30001ms', 'allowed 1ms to 30s'],
  ['server.switching.drain_timeout', '1s', '600s', '999ms', '601s', 'allowed 1s to 600s'],
  ['host.resource_policy.queue.request_deadline', '30s', '3600s', '999ms', '3601s', 'allowed 1s to 3600s'],
  ['host.resource_policy.queue.stream_idle_timeout', '1s', '3600s', '999ms', '3601s', 'allowed 1s to 3600s'],
  ['host.resource_policy.queue.max_pending_per_deployment', '0', '4096', '-1', '4097', 'allowed 0 to 4096'],
  ['host.resource_policy.queue.max_pending_total', '0', '1048576', '-1', '1048577', 'allowed 0 to 1048576'],
  ['host.resource_policy.queue.max_buffered_bytes_total', '1KiB', '16GiB', '1023', '16385MiB', 'allowed 1KiB to 16GiB'],
  ['server.hosts.down_after', '2s', '600s', '1999ms', '601s', 'allowed 2s to 600s'],
  ['server.lifecycle_defaults.ready_idle_timeout', '1s', '30d', '999ms', '31d', 'allowed 1s to 30d'],
  ['server.lifecycle_defaults.parked_idle_timeout', '1s', '30d', '999ms', '31d', 'allowed 1s to 30d'],
];

describe('ranges', () => {
  it.each(ranges)('%s accepts %s and %s', (path, low, high) => {
    for (const value of [low, high]) {
      const s = loadSettings('standalone', { text: yamlAt(path, value), env: {} }) as unknown as Record<
        string,
        unknown
      >;
      const read = path.split('.').reduce<unknown>((v, k) => (v as Record<string, unknown>)[k], s);
      const expected = parseDuration(value) ?? parseBytes(value);
      expect(read).toBe(expected);
    }
  });

  it.each(ranges)(
    '%s refuses %s and %s with the path, the value and the range',
    (path, _low, _high, below, above, range) => {
      for (const value of [below, above]) {
        expect(refusal('standalone', yamlAt(path, value))).toEqual([`${path}: ${value} is out of range: ${range}`]);
      }
    },
  );

  it('applies the same ranges to a host document', () => {
    expect(refusal('host', HOST_TOKEN + yamlAt('resource_policy.queue.request_deadline', '3601s'))).toEqual([
      'resource_policy.queue.request_deadline: 3601s is out of range: allowed 1s to 3600s',
    ]);
    expect(refusal('host', HOST_TOKEN + yamlAt('resource_policy.queue.max_pending_per_deployment', '4097'))).toEqual([
      'resource_policy.queue.max_pending_per_deployment: 4097 is out of range: allowed 0 to 4096',
    ]);
    expect(refusal('server', yamlAt('switching.drain_timeout', '601s'))).toEqual([
      'switching.drain_timeout: 601s is out of range: allowed 1s to 600s',
    ]);
  });

  it('refuses an admission window above the request deadline', () => {
    const text = 'host:\n  resource_policy:\n    queue:\n      request_deadline: 10s\n      admission_window: 11s\n';
    expect(refusal('standalone', text)).toEqual([
      'host.resource_policy.queue.admission_window: 11s is above the request deadline (10s)',
    ]);
    const ok = loadSettings('standalone', { text: text.replace('11s', '10s'), env: {} });
    expect(ok.host.resource_policy.queue.admission_window).toBe(10_000);
  });

  it('reads timers written off as off', () => {
    const s = loadSettings('server', {
      text: 'lifecycle_defaults:\n  ready_idle_timeout: off\n  parked_idle_timeout: "30m"\n',
      env: {},
    });
    expect(s.lifecycle_defaults).toEqual({ ready_idle_timeout: null, parked_idle_timeout: 1_800_000 });
  });
});

describe('durations and sizes', () => {
  it('reads 500ms, 2s, 5m and 1.5s', () => {
    expect(['500ms', '2s', '5m', '1h', '1.5s'].map(parseDuration)).toEqual([500, 2_000, 300_000, 3_600_000, 1_500]);
  });

  it('refuses a duration without a unit, naming what it expects', () => {
    expect(refusal('standalone', yamlAt('host.resource_policy.queue.admission_window', '2'))).toEqual([
      'host.resource_policy.queue.admission_window: 2 is not a duration with a unit, such as 500ms, 2s or 5m',
    ]);
  });

  it('reads sizes in binary and decimal units', () => {
    expect(['64MiB', '1GB', '512KiB', '1048576'].map((v) => parseBytes(v))).toEqual([64 * MiB, 1e9, 512 * 1024, MiB]);
  });
});

describe('precedence: --set over CAPYCTL_SET__ over the document', () => {
  const path = 'host.resource_policy.queue.max_pending_per_deployment';
  const doc = yamlAt(path, '10');
  const variable = 'CAPYCTL_SET__HOST__RESOURCE_POLICY__QUEUE__MAX_PENDING_PER_DEPLOYMENT';

  it('standalone: document, then variable, then --set', () => {
    const read = (sets: string[], env: NodeJS.ProcessEnv) =>
      loadSettings('standalone', { text: doc, sets, env }).host.resource_policy.queue.max_pending_per_deployment;
    expect(read([], {})).toBe(10);
    expect(read([], { [variable]: '20' })).toBe(20);
    expect(read([`${path}=0`], { [variable]: '20' })).toBe(0);
  });

  it('host document: the same order without the host. prefix', () => {
    const text =
      HOST_TOKEN +
      yamlAt('resource_policy.queue.max_pending_per_deployment', '10') +
      'lifecycle:\n  activation: on_demand\n';
    const read = (sets: string[], env: NodeJS.ProcessEnv) => loadSettings('host', { text, sets, env });
    expect(read([], {}).resource_policy.queue.max_pending_per_deployment).toBe(10);
    const env = {
      CAPYCTL_SET__RESOURCE_POLICY__QUEUE__MAX_PENDING_PER_DEPLOYMENT: '20',
      CAPYCTL_SET__LIFECYCLE__ACTIVATION: 'explicit',
    };
    expect(read([], env).resource_policy.queue.max_pending_per_deployment).toBe(20);
    expect(read([], env).lifecycle.activation).toBe('explicit');
    const flagged = read(['resource_policy.queue.max_pending_per_deployment=0', 'lifecycle.activation=on_demand'], env);
    expect(flagged.resource_policy.queue.max_pending_per_deployment).toBe(0);
    expect(flagged.lifecycle.activation).toBe('on_demand');
  });

  it('names the flag or variable a bad value came from', () => {
    expect(refusal('standalone', doc, [`${path}=5000`])).toEqual([
      `${path}: 5000 is out of range: allowed 0 to 4096 (from --set ${path}=5000)`,
    ]);
    expect(refusal('standalone', doc, [], { [variable]: 'lots' })).toEqual([
      `${path}: lots is not a whole number (from ${variable})`,
    ]);
  });

  it('leaves deployment documents to their file', () => {
    const d = loadSettings('deployment', {
      text: 'name: a\nengine: vllm\nmodel: m\n',
      env: { CAPYCTL_SET__NAME: 'b' },
    });
    expect(d.name).toBe('a');
  });
});

describe('refusals', () => {
  it('names an unknown key wherever it was written', () => {
    expect(refusal('standalone', 'host:\n  resource_policy:\n    queue:\n      admision_window: 2s\n')).toEqual([
      'host.resource_policy.queue.admision_window: unknown key',
    ]);
    expect(refusal('standalone', '', [], { CAPYCTL_SET__HOST__QUEUE__X: '1' })).toEqual([
      'host.queue: unknown key (from CAPYCTL_SET__HOST__QUEUE__X)',
    ]);
    expect(refusal('server', '', ['switching.drain=5s'])).toEqual([
      'switching.drain: unknown key (from --set switching.drain=5s)',
    ]);
  });

  it('reports every problem of a document at once', () => {
    const problems = refusal('deployment', 'name: Chat_A\nengine: llama\nresidency: somewhere\n');
    expect(problems).toEqual([
      'name: Chat_A must be lowercase letters, digits and dashes, 1 to 63 long, starting and ending with a letter or digit',
      'engine: llama is not one of vllm, sglang, tensorfold',
      'model: is required',
      'residency: somewhere is not one of host_backed, deep, restart_only',
    ]);
  });

  it('reads a document of 100,000 keys in seconds, naming the first unknown ones', () => {
    // The YAML library's own unique-key check compared every key with every other: 150 s for this one.
    const text = Array.from({ length: 100_000 }, (_, i) => `k${i}: ${i}`).join('\n');
    const began = Date.now();
    const problems = refusal('server', text);
    expect(Date.now() - began).toBeLessThan(60_000);
    expect(problems.slice(0, 2)).toEqual(['k0: unknown key', 'k1: unknown key']);
    expect(problems).toHaveLength(100_000);
  }, 90_000);

  it('refuses a malformed document with where it broke', () => {
    expect(refusal('server', 'switching:\n  drain_timeout: [5s\n')[0]).toMatch(
      /^malformed YAML: .* at line \d+, column \d+$/,
    );
    expect(refusal('server', '- a\n- b\n')).toEqual(['the document must be a mapping of settings, not ["a","b"]']);
    expect(refusal('server', 'a: 1\na: 2\n')).toEqual(['malformed YAML: Map keys must be unique at line 2, column 1']);
    expect(refusal('server', 'switching:\n  drain_timeout: 5s\n  drain_timeout: 6s\n')).toEqual([
      'malformed YAML: Map keys must be unique at line 3, column 3',
    ]);
    // Thousands deep, composing the document could take the process down: refused before, in flow
    // style or in block style. Settings themselves nest a few levels.
    expect(refusal('deployment', `name: ${'['.repeat(5_000)}${']'.repeat(5_000)}`)).toEqual([
      'malformed YAML: lists and mappings nest more than 64 levels deep',
    ]);
    expect(refusal('host', `${'- '.repeat(5_000)}x`)).toEqual([
      'malformed YAML: lists and mappings nest more than 64 levels deep',
    ]);
    const deepMapping = `${Array.from({ length: 70 }, (_, i) => `${'  '.repeat(i)}k${i}:`).join('\n')} 1`;
    expect(refusal('host', deepMapping)).toEqual(['malformed YAML: lists and mappings nest more than 64 levels deep']);
    expect(
      refusal(
        'deployment',
        'name: "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["\nengine: vllm\nmodel: m',
      ),
    ).toEqual([
      'name: [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[ must be lowercase letters, digits and dashes, 1 to 63 long, starting and ending with a letter or digit',
    ]);
  });

  it('refuses a --set without a value', () => {
    expect(refusal('host', HOST_TOKEN, ['lifecycle.activation'])).toEqual([
      '--set lifecycle.activation: expected path=value, such as resource_policy.queue.max_pending_per_deployment=0',
    ]);
  });

  it('refuses a --set through a value', () => {
    expect(refusal('standalone', 'data_dir: here\n', ['data_dir.x=1'])).toEqual([
      'data_dir: is a value, not a section, so --set data_dir.x=1 cannot set data_dir.x',
    ]);
  });
});

describe('several hosts: the tightest limits apply', () => {
  const host = (text: string) => loadSettings('host', { text: HOST_TOKEN + text, env: {} }).resource_policy.queue;

  it('takes the smallest waiting limits and request deadline any host sets', () => {
    const a = host(yamlAt('resource_policy.queue.max_pending_per_deployment', '0'));
    const b = host(
      'resource_policy:\n  queue:\n    request_deadline: 60s\n    max_pending_total: 100\n    max_buffered_bytes_total: 1MiB\n',
    );
    expect(tightestOfHosts([a, b], host(''))).toEqual({
      max_pending_per_deployment: 0,
      max_pending_total: 100,
      max_buffered_bytes_total: MiB,
      request_deadline: 60_000,
    });
  });

  it('falls back to the host defaults before any host registers', () => {
    const defaults = host('');
    expect(tightestOfHosts([], defaults)).toEqual({
      max_pending_per_deployment: 64,
      max_pending_total: 256,
      max_buffered_bytes_total: 64 * MiB,
      request_deadline: 600_000,
    });
  });
});
