/** The host document the tests run a host agent with: simulated GPU, simulator engines, short graces. */
import { CAPYCTL } from './capyctl.js';

export interface SimHost {
  hostId: string;
  serverUrl: string;
  token: string;
  temporalAddress: string;
  dataDir: string;
  /** Each simulated card's memory, e.g. "8GiB". */
  gpuMemory: string;
  /** How many such cards; one unless said. */
  gpuCount?: number;
  memoryKind?: 'discrete' | 'unified';
  hostRam?: string;
  /** More lines of the document (YAML), e.g. `lifecycle: { activation: explicit }`. */
  extra?: string;
}

const sim = (dialect: string) => `["${process.execPath}", "${CAPYCTL}", "sim", "${dialect}"]`;

export function simHostYaml(h: SimHost): string {
  return [
    `id: ${h.hostId}`,
    `server: { url: "${h.serverUrl}", token: "${h.token}" }`,
    `temporal: { address: "${h.temporalAddress}" }`,
    'ingress: { listen: "127.0.0.1:0" }',
    `data_dir: "${h.dataDir}"`,
    `gpus: [${Array(h.gpuCount ?? 1)
      .fill(`{ memory: ${h.gpuMemory}, memory_kind: ${h.memoryKind ?? 'discrete'} }`)
      .join(', ')}]`,
    `host_ram: ${h.hostRam ?? '64GiB'}`,
    'shutdown_grace: 5s',
    'engine_stop_grace: 5s',
    `engines: { vllm: { command: ${sim('vllm')} }, sglang: { command: ${sim('sglang')} }, tensorfold: { command: ${sim('tensorfold')} } }`,
    h.extra ?? '',
  ].join('\n');
}
