/**
 * How busy this machine was while a block of a benchmark ran, and how much of its CPU time the
 * hypervisor gave to other guests (the "steal" column of Linux's /proc/stat). The same code measures
 * up to twice as slow from one run to the next here; a block with high steal or busy time ran on a
 * slower machine, not slower code, and its figures say so beside them.
 */
import { readFileSync } from 'node:fs';

interface CpuTicks {
  total: number;
  idle: number;
  steal: number;
}

function cpuTicks(): CpuTicks | null {
  try {
    // cpu  user nice system idle iowait irq softirq steal guest guest_nice
    const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
    const [, , , idle = 0, iowait = 0, , , steal = 0] = fields;
    return { total: fields.slice(0, 8).reduce((a, b) => a + b, 0), idle: idle + iowait, steal };
  } catch {
    return null;
  }
}

/** Starts watching; the returned function describes the machine since then (empty off Linux). */
export function watchCpu(): () => string {
  const from = cpuTicks();
  return () => {
    const to = cpuTicks();
    if (!from || !to || to.total <= from.total) return '';
    const span = to.total - from.total;
    const pct = (ticks: number) => `${((100 * ticks) / span).toFixed(1)}%`;
    return `machine during the block: CPU busy ${pct(span - (to.idle - from.idle))}, stolen by the hypervisor ${pct(to.steal - from.steal)}`;
  };
}
