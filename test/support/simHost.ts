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
  /** More of an engine's section: arguments after its simulator command, and its other settings. */
  engines?: Partial<Record<SimDialect, EngineSection>>;
}

export type SimDialect = 'vllm' | 'sglang' | 'tensorfold';

export interface EngineSection {
  args?: string[];
  unlistedVersionAs?: string;
}

/** An engine's section of the host document: the simulator in its dialect, and what `section` adds. */
function engineSection(dialect: SimDialect, section: EngineSection = {}): string {
  const command = JSON.stringify([process.execPath, CAPYCTL, 'sim', dialect, ...(section.args ?? [])]);
  const unlisted = section.unlistedVersionAs ? `, unlisted_version_as: "${section.unlistedVersionAs}"` : '';
  return `${dialect}: { command: ${command}${unlisted} }`;
}

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
    `engines: { ${(['vllm', 'sglang', 'tensorfold'] as const).map((d) => engineSection(d, h.engines?.[d])).join(', ')} }`,
    h.extra ?? '',
  ].join('\n');
}
