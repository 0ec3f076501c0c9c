import { describe, expect, it } from 'vitest';
import { apiErrors, engineSettingRefusals } from '../domain/catalogue.js';
import { judgeVersion, releaseOf, supportedRange } from '../engines/engineVersions.js';
import { hostEnginesRefusals } from '../engines/hostEngines.js';
import { hostDocument } from '../settings/hostDocument.js';
import {
  cannotParkReasons,
  documentRefusal,
  expectedMaxRunning,
  hostBackedRefusals,
  hostsRefusal,
  keepsWeightsWhenParked,
  maxRunningToPass,
  type ParkSituation,
  parkPlan,
  parkRefusal,
  releasedLine,
  releasingLine,
  reportedMaxRunning,
} from '../engines/rules.js';
import { parallelLayout } from '../engines/parallelism.js';

import { findCount, findOption } from '../engines/launchOptions.js';
import { deploymentDocument } from '../settings/deploymentDocument.js';

/** The schedulers an instance's batch is split between. */
const batchRanks = (engine: 'vllm' | 'sglang', args: string[]) => parallelLayout(engine, args).batchRanks;

const GiB = 2 ** 30;

const deployment = (fields: Record<string, unknown>) =>
  deploymentDocument.parse({ name: 'my-model', engine: 'vllm', model: 'Qwen3-4B', ...fields });

/** A discrete card with room in host RAM for an 8 GiB copy, unless a case says otherwise. */
const situation = (fields: Record<string, unknown>, more: Partial<ParkSituation> = {}): ParkSituation => ({
  spec: deployment(fields),
  memoryKind: 'discrete',
  weightsBytes: 8 * GiB,
  hostRamFreeBytes: 64 * GiB,
  engineVersion: '0.10.1',
  ...more,
});

const refusalMessage = (reason: string) =>
  `deployment my-model cannot be parked: ${reason}; declare residency: restart_only`;

describe('park tier', () => {
  it('parks in host RAM on a discrete card when the copy fits', () => {
    expect(parkPlan(situation({}))).toEqual({ kind: 'park', tier: 'host_ram' });
    expect(parkPlan(situation({ engine: 'sglang' }))).toEqual({ kind: 'park', tier: 'host_ram' });
  });

  it('counts a copy exactly the size of the free RAM as fitting', () => {
    expect(parkPlan(situation({}, { hostRamFreeBytes: 8 * GiB }))).toEqual({ kind: 'park', tier: 'host_ram' });
  });

  it('parks deep on a discrete card when the copy does not fit in the free host RAM', () => {
    expect(parkPlan(situation({}, { hostRamFreeBytes: 8 * GiB - 1 }))).toEqual({ kind: 'park', tier: 'deep' });
  });

  it('parks deep on unified memory, however much RAM is free', () => {
    expect(parkPlan(situation({}, { memoryKind: 'unified' }))).toEqual({ kind: 'park', tier: 'deep' });
    expect(parkPlan(situation({ engine: 'sglang' }, { memoryKind: 'unified' }))).toEqual({
      kind: 'park',
      tier: 'deep',
    });
  });

  it('parks SGLang with speculative decoding with its weights kept, on either memory', () => {
    const eagle = { engine: 'sglang', extra_args: ['--speculative-algorithm', 'EAGLE'] };
    expect(keepsWeightsWhenParked(deployment(eagle))).toBe(true);
    expect(parkPlan(situation(eagle))).toEqual({ kind: 'park', tier: 'kv_only' });
    expect(parkPlan(situation(eagle, { memoryKind: 'unified', hostRamFreeBytes: 0 }))).toEqual({
      kind: 'park',
      tier: 'kv_only',
    });
    expect(parkPlan(situation({ ...eagle, residency: 'deep' }))).toEqual({ kind: 'park', tier: 'kv_only' });
    expect(parkPlan(situation({ engine: 'sglang', extra_args: ['--speculative-algorithm=NGRAM'] }))).toEqual({
      kind: 'park',
      tier: 'kv_only',
    });
  });

  it('does not treat vLLM with a speculative option as keeping its weights', () => {
    expect(keepsWeightsWhenParked(deployment({ extra_args: ['--speculative-algorithm', 'EAGLE'] }))).toBe(false);
  });

  it('parks deep with residency: deep on a discrete card with room', () => {
    expect(parkPlan(situation({ residency: 'deep' }))).toEqual({ kind: 'park', tier: 'deep' });
  });

  it('parks in host RAM with residency: host_backed, and stops when there is no room', () => {
    expect(parkPlan(situation({ residency: 'host_backed' }))).toEqual({ kind: 'park', tier: 'host_ram' });
    const noRoom = parkPlan(
      situation({ residency: 'host_backed' }, { hostRamFreeBytes: GiB, launchedTier: 'host_ram' }),
    );
    expect(noRoom).toEqual({ kind: 'stop', reason: 'no_room' });
  });

  it('launches host_backed for host RAM even while the copy does not fit yet: the fit is counted at the park', () => {
    expect(parkPlan(situation({ residency: 'host_backed' }, { hostRamFreeBytes: GiB }))).toEqual({
      kind: 'park',
      tier: 'host_ram',
    });
  });

  it('refuses host_backed on unified memory', () => {
    const plan = parkPlan(situation({ residency: 'host_backed' }, { memoryKind: 'unified' }));
    expect(plan).toEqual({
      kind: 'refused',
      error: {
        status: 400,
        code: 'invalid_request',
        retryable: false,
        message: hostBackedRefusals.unifiedMemory('my-model'),
      },
    });
  });

  it('refuses host_backed for SGLang with speculative decoding', () => {
    const plan = parkPlan(
      situation({ engine: 'sglang', residency: 'host_backed', extra_args: ['--speculative-algorithm', 'EAGLE3'] }),
    );
    expect(plan).toEqual({
      kind: 'refused',
      error: {
        status: 400,
        code: 'invalid_request',
        retryable: false,
        message: hostBackedRefusals.keepsWeights('my-model'),
      },
    });
  });

  it('stops instead of parking with residency: restart_only', () => {
    expect(parkPlan(situation({ residency: 'restart_only' }))).toEqual({ kind: 'stop', reason: 'restart_only' });
  });

  it('stops TensorFold, which cannot park, whatever its residency', () => {
    expect(parkPlan(situation({ engine: 'tensorfold' }))).toEqual({ kind: 'stop', reason: 'engine_cannot_park' });
    expect(parkPlan(situation({ engine: 'tensorfold', residency: 'host_backed' }, { memoryKind: 'unified' }))).toEqual({
      kind: 'stop',
      reason: 'engine_cannot_park',
    });
  });

  it('stops a decision model: it restarts instead of parking in this release', () => {
    const decision = { decision: { prompt: 'Is it spam?', options: ['yes', 'no'] } };
    expect(parkPlan(situation(decision))).toEqual({ kind: 'stop', reason: 'decision_model' });
  });

  it('stops an engine launched unable to park', () => {
    expect(parkPlan(situation({}, { launchedTier: null }))).toEqual({
      kind: 'stop',
      reason: 'launched_unable_to_park',
    });
  });

  it('lets vLLM choose its tier at each park, whatever it was launched for', () => {
    expect(parkPlan(situation({}, { launchedTier: 'host_ram', hostRamFreeBytes: GiB }))).toEqual({
      kind: 'park',
      tier: 'deep',
    });
    expect(parkPlan(situation({}, { launchedTier: 'deep' }))).toEqual({ kind: 'park', tier: 'host_ram' });
  });

  it('parks SGLang at the tier it was launched for, and stops it when its host RAM copy no longer fits', () => {
    const sglang = { engine: 'sglang' };
    expect(parkPlan(situation(sglang, { launchedTier: 'deep' }))).toEqual({ kind: 'park', tier: 'deep' });
    expect(parkPlan(situation(sglang, { launchedTier: 'host_ram' }))).toEqual({ kind: 'park', tier: 'host_ram' });
    expect(parkPlan(situation(sglang, { launchedTier: 'host_ram', hostRamFreeBytes: GiB }))).toEqual({
      kind: 'stop',
      reason: 'no_room',
    });
    // At launch it has no tier yet: without room it is launched for deep.
    expect(parkPlan(situation(sglang, { hostRamFreeBytes: GiB }))).toEqual({ kind: 'park', tier: 'deep' });
  });

  it('gives each outcome its receipt line', () => {
    expect(releasedLine({ kind: 'park', tier: 'host_ram' })).toBe('released: parked (host RAM)');
    expect(releasedLine({ kind: 'park', tier: 'deep' })).toBe('released: parked (deep)');
    expect(releasedLine({ kind: 'park', tier: 'kv_only' })).toBe('released: parked (weights kept)');
    expect(releasedLine({ kind: 'stop', reason: 'no_room' })).toBe('released: stopped (no room to park)');
    expect(releasedLine({ kind: 'stop', reason: 'restart_only' })).toBe('released: stopped');
    // On a start's receipt, which answers as the switch begins.
    expect(releasingLine({ kind: 'park', tier: 'host_ram' })).toBe('releasing: parking (host RAM)');
    expect(releasingLine({ kind: 'park', tier: 'kv_only' })).toBe('releasing: parking (weights kept)');
    expect(releasingLine({ kind: 'stop', reason: 'no_room' })).toBe('releasing: stopping (no room to park)');
    expect(releasingLine({ kind: 'stop', reason: 'operator' })).toBe('releasing: stopping');
  });
});

describe('capability_missing:deep_park', () => {
  const refused = (reason: string) => ({
    kind: 'refused',
    error: { status: 409, code: 'capability_missing:deep_park', retryable: false, message: refusalMessage(reason) },
  });

  it.each([
    ['vllm', 'openai/gpt-oss-20b'],
    ['sglang', 'openai/gpt-oss-120b'],
    ['vllm', 'unsloth/GPT-OSS-20B-GGUF'],
  ])('refuses gpt-oss on %s (%s)', (engine, model) => {
    expect(parkPlan(situation({ engine, model }))).toEqual(refused(cannotParkReasons.gptOss));
  });

  it('lets gpt-oss stop on TensorFold, which never parks', () => {
    expect(parkPlan(situation({ engine: 'tensorfold', model: 'openai/gpt-oss-20b' }))).toEqual({
      kind: 'stop',
      reason: 'engine_cannot_park',
    });
  });

  it('refuses an NVFP4 checkpoint on SGLang, by name or by --quantization modelopt_fp4', () => {
    expect(parkPlan(situation({ engine: 'sglang', model: 'nvidia/Llama-3.3-70B-Instruct-NVFP4' }))).toEqual(
      refused(cannotParkReasons.nvfp4OnSglang),
    );
    expect(
      parkPlan(situation({ engine: 'sglang', model: 'my/llama', extra_args: ['--quantization', 'modelopt_fp4'] })),
    ).toEqual(refused(cannotParkReasons.nvfp4OnSglang));
    expect(
      parkPlan(situation({ engine: 'sglang', model: 'my/llama', extra_args: ['--quantization=modelopt_fp4'] })),
    ).toEqual(refused(cannotParkReasons.nvfp4OnSglang));
  });

  it('lets NVFP4 park on SGLang when it keeps its weights (speculative decoding), and on vLLM', () => {
    const eagle = {
      engine: 'sglang',
      model: 'nvidia/Llama-3.3-70B-Instruct-NVFP4',
      extra_args: ['--speculative-algorithm', 'EAGLE'],
    };
    expect(parkPlan(situation(eagle))).toEqual({ kind: 'park', tier: 'kv_only' });
    expect(parkPlan(situation({ model: 'nvidia/Llama-3.3-70B-Instruct-NVFP4' }))).toEqual({
      kind: 'park',
      tier: 'host_ram',
    });
  });

  it('refuses Nemotron 3.5 Super VL on vLLM 0.31.0, and when the version is not known', () => {
    const nemotron = { model: 'nvidia/NVIDIA-Nemotron-3.5-Super-VL-120B-A12B-FP8' };
    expect(parkPlan(situation(nemotron, { engineVersion: '0.31.0' }))).toEqual(
      refused(cannotParkReasons.nemotronVlOnVllm),
    );
    expect(parkPlan(situation(nemotron, { engineVersion: '0.31.0+cu128' }))).toEqual(
      refused(cannotParkReasons.nemotronVlOnVllm),
    );
    expect(parkPlan(situation(nemotron, { engineVersion: undefined }))).toEqual(
      refused(cannotParkReasons.nemotronVlOnVllm),
    );
  });

  it('lets Nemotron 3.5 Super VL park on another vLLM version and on SGLang', () => {
    const nemotron = { model: 'nvidia/Nemotron_3_5_Super_VL' };
    expect(parkPlan(situation({ model: 'nvidia/Nemotron-3.5-Super-VL' }, { engineVersion: '0.31.1' }))).toEqual({
      kind: 'park',
      tier: 'host_ram',
    });
    expect(parkPlan(situation({ ...nemotron, engine: 'sglang' }, { engineVersion: undefined }))).toEqual({
      kind: 'park',
      tier: 'host_ram',
    });
  });

  it('does not take other Nemotron models for the VL one', () => {
    for (const model of [
      'nvidia/Nemotron-3.5-Super-120B',
      'nvidia/Nemotron-3-Super-VL',
      'nvidia/Nemotron-3.5-Nano-VL',
    ]) {
      expect(parkRefusal(deployment({ model }))).toBeNull();
    }
  });

  it('refuses nothing once residency: restart_only is declared', () => {
    for (const fields of [
      { model: 'openai/gpt-oss-20b' },
      { engine: 'sglang', model: 'x/y-NVFP4' },
      { model: 'nvidia/Nemotron-3.5-Super-VL' },
    ]) {
      expect(parkRefusal(deployment({ ...fields, residency: 'restart_only' }))).toBeNull();
      expect(parkPlan(situation({ ...fields, residency: 'restart_only' }))).toEqual({
        kind: 'stop',
        reason: 'restart_only',
      });
    }
  });

  it('refuses a decision model its engine cannot wake too: the refusal is about the deployment, not this release', () => {
    const plan = parkPlan(situation({ model: 'openai/gpt-oss-20b', decision: { prompt: 'p', options: ['a', 'b'] } }));
    expect(plan).toEqual(refused(cannotParkReasons.gptOss));
  });
});

describe('refusals at deploy', () => {
  it('refuses a model its engine cannot wake unless it declares restart_only, and a park its engine cannot do', () => {
    const refusal = (fields: Record<string, unknown>) => documentRefusal(deployment(fields));
    const residency = (reason: string) => ({
      field: 'residency',
      error: expect.objectContaining({ code: 'capability_missing:deep_park', message: refusalMessage(reason) }),
    });
    // Left without a residency, a deployment parks: refused at deploy, not at its first park.
    for (const [fields, reason] of [
      [{ model: 'openai/gpt-oss-20b' }, cannotParkReasons.gptOss],
      [{ model: 'openai/gpt-oss-20b', residency: 'host_backed' }, cannotParkReasons.gptOss],
      [{ engine: 'sglang', model: 'openai/gpt-oss-120b' }, cannotParkReasons.gptOss],
      [
        { engine: 'sglang', model: 'my/llama', extra_args: ['--quantization', 'modelopt_fp4'] },
        cannotParkReasons.nvfp4OnSglang,
      ],
      [{ model: 'nvidia/Nemotron-3.5-Super-VL' }, cannotParkReasons.nemotronVlOnVllm],
      [{ engine: 'tensorfold', residency: 'host_backed' }, cannotParkReasons.engine('tensorfold')],
    ] as const) {
      expect(refusal(fields), JSON.stringify(fields)).toEqual(residency(reason));
    }
    for (const fields of [
      { model: 'openai/gpt-oss-20b', residency: 'restart_only' },
      { model: 'nvidia/Nemotron-3.5-Super-VL', residency: 'restart_only' },
      { engine: 'sglang', model: 'x/y-NVFP4', extra_args: ['--speculative-algorithm', 'EAGLE'] },
      { engine: 'tensorfold', model: 'openai/gpt-oss-20b' },
      { engine: 'tensorfold' },
      { engine: 'tensorfold', residency: 'restart_only' },
      { residency: 'host_backed' },
    ]) {
      expect(refusal(fields), JSON.stringify(fields)).toBeNull();
    }
  });

  it('names instances for more instances than hosts', () => {
    expect(documentRefusal(deployment({ instances: 2, hosts: ['gpu-a'] }))).toEqual({
      field: 'instances',
      error: expect.objectContaining({ code: 'invalid_request' }),
    });
  });

  it('names extra_args for data parallelism in one engine, whose groups each hold the whole model', () => {
    expect(documentRefusal(deployment({ extra_args: ['-tp', '2', '--data-parallel-size', '2'] }))).toEqual({
      field: 'extra_args',
      error: apiErrors.invalidRequest(
        "deployment my-model: its extra_args ask for 2 data-parallel groups of 2 GPUs; capyctl sizes an instance's memory " +
          'for tensor and pipeline parallelism only: serve copies with instances: 2 instead',
      ),
    });
    expect(documentRefusal(deployment({ extra_args: ['-tp', '4', '-pp', '2'] }))).toBeNull();
  });

  it('names max_model_len for an engine that takes none, and for one set twice', () => {
    expect(documentRefusal(deployment({ engine: 'tensorfold', max_model_len: 4096 }))).toEqual({
      field: 'max_model_len',
      error: apiErrors.invalidRequest(
        'deployment my-model: max_model_len: TensorFold takes no maximum sequence length',
      ),
    });
    expect(documentRefusal(deployment({ max_model_len: 4096, extra_args: ['--max-model-len=8192'] }))).toEqual({
      field: 'max_model_len',
      error: apiErrors.invalidRequest(
        'deployment my-model: max_model_len 4096 and --max-model-len 8192 are both set: set one',
      ),
    });
    expect(documentRefusal(deployment({ engine: 'sglang', max_model_len: 4096 }))).toBeNull();
  });

  it('refuses host_backed where a host it may run on has unified memory', () => {
    const hosts = [
      { id: 'gpu-a', gpus: [{ memoryKind: 'discrete' as const }] },
      { id: 'gpu-b', gpus: [{ memoryKind: 'discrete' as const }, { memoryKind: 'unified' as const }] },
    ];
    expect(hostsRefusal(deployment({ residency: 'host_backed' }), hosts)?.message).toBe(
      hostBackedRefusals.unifiedMemoryOn('my-model', 'gpu-b'),
    );
    expect(hostsRefusal(deployment({ residency: 'deep' }), hosts)).toBeNull();
    expect(hostsRefusal(deployment({ residency: 'host_backed' }), hosts.slice(0, 1))).toBeNull();
  });
});

describe('max_running sources', () => {
  const host = (engine: string, fields: Record<string, unknown> = {}, command: string[] = ['serve']) => ({
    spec: deployment({ engine, ...fields }),
    command,
  });

  it('default: CapyCTL passes 32 to vLLM and 8 to TensorFold', () => {
    expect(expectedMaxRunning(host('vllm'))).toEqual({ count: 32, source: 'default' });
    expect(expectedMaxRunning(host('tensorfold'))).toEqual({ count: 8, source: 'default' });
    expect(maxRunningToPass(host('vllm'))).toBe(32);
  });

  it('declared: max_concurrent_requests, passed to every engine', () => {
    for (const engine of ['vllm', 'sglang', 'tensorfold']) {
      expect(expectedMaxRunning(host(engine, { max_concurrent_requests: 12 }))).toEqual({
        count: 12,
        source: 'declared',
      });
      expect(maxRunningToPass(host(engine, { max_concurrent_requests: 12 }))).toBe(12);
    }
  });

  it('engine_default: SGLang chooses when nothing is declared, count absent', () => {
    expect(expectedMaxRunning(host('sglang'))).toEqual({ source: 'engine_default' });
    expect(maxRunningToPass(host('sglang'))).toBeUndefined();
  });

  it('extra_args: the option in the deployment wins over everything, and CapyCTL passes nothing', () => {
    const ctx = host('vllm', { max_concurrent_requests: 12, extra_args: ['--max-num-seqs=4'] }, [
      'vllm',
      'serve',
      '--max-num-seqs',
      '64',
    ]);
    expect(expectedMaxRunning(ctx)).toEqual({ count: 4, source: 'extra_args' });
    expect(maxRunningToPass(ctx)).toBeUndefined();
    expect(expectedMaxRunning(host('sglang', { extra_args: ['--max-running-requests', '6'] }))).toEqual({
      count: 6,
      source: 'extra_args',
    });
    // vLLM's parser takes the underscore spelling too.
    expect(expectedMaxRunning(host('vllm', { extra_args: ['--max_num_seqs', '5'] }))).toEqual({
      count: 5,
      source: 'extra_args',
    });
  });

  it('extra_args with a value that is not a count: source known, count absent', () => {
    expect(expectedMaxRunning(host('tensorfold', { extra_args: ['--max-running', 'auto'] }))).toEqual({
      source: 'extra_args',
    });
  });

  it("host_fixed: the option in the host's engine command wins over the declaration", () => {
    const ctx = host('vllm', { max_concurrent_requests: 12 }, ['vllm', 'serve', '--max-num-seqs', '64']);
    expect(expectedMaxRunning(ctx)).toEqual({ count: 64, source: 'host_fixed' });
    expect(maxRunningToPass(ctx)).toBeUndefined();
  });

  it("on_host: where the host's command is not known, the host sizes it at launch, count absent; a declared figure is still declared", () => {
    expect(expectedMaxRunning({ spec: deployment({}) })).toEqual({ source: 'on_host' });
    expect(expectedMaxRunning({ spec: deployment({ max_concurrent_requests: 12 }) })).toEqual({
      count: 12,
      source: 'declared',
    });
    expect(expectedMaxRunning({ spec: deployment({ extra_args: ['--max-num-seqs', '4'] }) })).toEqual({
      count: 4,
      source: 'extra_args',
    });
  });

  it("engine: the engine's own figure once it reports one", () => {
    expect(reportedMaxRunning({ source: 'engine_default' }, 48)).toEqual({ count: 48, source: 'engine' });
    expect(reportedMaxRunning({ count: 12, source: 'declared' }, 12)).toEqual({ count: 12, source: 'engine' });
    expect(reportedMaxRunning({ count: 12, source: 'declared' }, undefined)).toEqual({ count: 12, source: 'declared' });
  });

  it("state_cache: an engine that runs fewer than it was passed is held back by a hybrid model's state", () => {
    expect(reportedMaxRunning({ count: 32, source: 'declared' }, 9)).toEqual({ count: 9, source: 'state_cache' });
    expect(reportedMaxRunning({ count: 16, source: 'extra_args' }, 10)).toEqual({ count: 10, source: 'state_cache' });
  });

  it("SGLang's batch is split between its DP ranks' schedulers only with DP attention", () => {
    expect(batchRanks('sglang', ['--tp-size', '4', '--dp-size', '4', '--enable-dp-attention'])).toBe(4);
    expect(batchRanks('sglang', ['--tp', '2', '--dp', '2'])).toBe(1);
    expect(batchRanks('sglang', ['--tp', '2'])).toBe(1);
    expect(batchRanks('vllm', ['--data-parallel-size', '2'])).toBe(1);
  });
});

describe('reading options out of an argv', () => {
  it('reads both spellings, the last occurrence, and a flag without a value', () => {
    const argv = ['serve', '--port', '1', '--max-num-seqs', '3', '--enable-sleep-mode', '--max_num_seqs=7', '--flag'];
    expect(findOption(argv, '--max-num-seqs')).toBe('7');
    expect(findOption(argv, '--enable-sleep-mode')).toBe('');
    expect(findOption(argv, '--flag')).toBe('');
    expect(findOption(argv, '--absent')).toBeUndefined();
    expect(findCount(argv, '--port')).toBe(1);
    expect(findCount(['--max-running', '0'], '--max-running')).toBeUndefined();
  });

  it('reads every spelling of one option, single-dash ones too, and the last of any of them wins', () => {
    const tp = ['--tensor-parallel-size', '-tp'];
    expect(findCount(['serve', 'm', '-tp', '4'], tp)).toBe(4);
    expect(findCount(['serve', 'm', '-tp=4'], tp)).toBe(4);
    expect(findCount(['--tensor-parallel-size=2', '-tp', '4'], tp)).toBe(4);
    expect(findCount(['-tp', '4', '--tensor_parallel_size', '8'], tp)).toBe(8);
    expect(findCount(['-tp', '4', '--tensor-parallel-size=2'], tp)).toBe(2);
    // A single-dash option is a flag's next option, not its value; a negative number is a value.
    expect(findOption(['--enable-sleep-mode', '-tp', '2'], '--enable-sleep-mode')).toBe('');
    expect(findOption(['--chunked-prefill-size', '-1'], '--chunked-prefill-size')).toBe('-1');
    // A longer option that starts the same is another option.
    expect(findCount(['-tpx', '3', '--tensor-parallel-size-x', '3'], tp)).toBeUndefined();
  });
});

describe('engine versions', () => {
  it('compares releases on their first three numbers: pre-, post-release and local builds count as their release', () => {
    expect(releaseOf('0.17.0+cu128')).toEqual([0, 17, 0]);
    expect(releaseOf('v0.11.0rc2.dev12+g1a2b')).toEqual([0, 11, 0]);
    expect(releaseOf('0.5.4.post1')).toEqual([0, 5, 4]);
    expect(releaseOf('1.0')).toEqual([1, 0, 0]);
    expect(releaseOf('nightly')).toBeUndefined();
    expect(supportedRange('vllm', '0.16.9')?.sends).toEqual({});
    expect(supportedRange('vllm', '0.17.0+cu128')?.sends).toEqual({ sleepMode: 'wait' });
    expect(supportedRange('vllm', '0.32.0')).toBeUndefined();
    expect(supportedRange('vllm', '0.10.0')).toBeUndefined();
    expect(supportedRange('sglang', '0.5.5')?.sends).toEqual({});
    expect(supportedRange('sglang', '0.5.6')?.sends).toEqual({ pauseMode: 'abort' });
    expect(supportedRange('tensorfold', '1.4.2')?.sends).toEqual({});
  });

  it('runs an unlisted or unreported version only as the listed one the host names', () => {
    expect(judgeVersion('vllm', '0.33.0', undefined)).toEqual({ ok: false, reported: '0.33.0' });
    expect(judgeVersion('vllm', null, undefined)).toEqual({ ok: false, reported: null });
    expect(judgeVersion('vllm', '0.33.0', '0.17.0')).toEqual({
      ok: true,
      checked: { reported: '0.33.0', treatedAs: '0.17.0', sends: { sleepMode: 'wait' } },
    });
    // A listed version is sent its own requests, whatever the host names.
    expect(judgeVersion('vllm', '0.12.1', '0.17.0')).toEqual({
      ok: true,
      checked: { reported: '0.12.1', treatedAs: '0.12.1', sends: {} },
    });
    expect(judgeVersion('sglang', '0.7.0', '0.9.0')).toEqual({ ok: false, reported: '0.7.0' });
  });

  it("refuses a host's engines section that lets vLLM sleep on its own or names an unknown version", () => {
    const engines = hostDocument.parse({ server: { token: 't' } }).engines;
    expect(hostEnginesRefusals(engines)).toEqual([]);
    expect(
      hostEnginesRefusals({
        ...engines,
        vllm: { ...engines.vllm, command: ['vllm', 'serve', '--sleep_idle_ttl=30'], unlisted_version_as: '0.9.0' },
      }),
    ).toEqual([
      engineSettingRefusals.selfParkOption('engines.vllm.command', '--sleep-idle-ttl', 'vLLM'),
      engineSettingRefusals.unlistedAsUnknown(
        'engines.vllm.unlisted_version_as',
        '0.9.0',
        'vLLM',
        '0.10.1 up to (not including) 0.32.0',
      ),
    ]);
  });

  it('refuses a deployment whose extra_args let vLLM sleep on its own, in any spelling, naming extra_args', () => {
    const refusal = documentRefusal(deployment({ extra_args: ['--sleep_idle_ttl', '60'] }));
    expect(refusal).toEqual({
      field: 'extra_args',
      error: apiErrors.invalidRequest(
        engineSettingRefusals.selfParkOption('deployment my-model: its extra_args', '--sleep-idle-ttl', 'vLLM'),
      ),
    });
  });
});
