import { readFileSync } from 'node:fs';

/** Whether a process still runs: it exists and is not a zombie nobody has reaped yet. */
export function isRunning(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}
