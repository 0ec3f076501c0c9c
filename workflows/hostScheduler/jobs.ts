/** The host scheduler's queue of operator commands. Pure: a job is a command and the promise its caller awaits. */
import type { CommandReceipt } from '../../api/lifecycle.js';

export type Command =
  | { kind: 'start'; deploymentId: string; evict: boolean; instanceIndex: number }
  | { kind: 'stop' | 'park' | 'preinitialize' | 'delete'; deploymentId: string }
  | { kind: 'drainHost' };

/**
 * A command waiting its turn; its update handler awaits `receipts`. It settles once: with the
 * command's answer, or with its failure if it has not answered. A start or a park answers as its
 * switch begins; a failure of that switch later is the switch's to tell (its waiters and its history
 * say it), not the command's.
 */
export class Job {
  readonly receipts: Promise<CommandReceipt[]>;
  private settle: { resolve: (receipts: CommandReceipt[]) => void; reject: (failure: unknown) => void } | null = null;

  constructor(readonly command: Command) {
    this.receipts = new Promise((resolve, reject) => {
      this.settle = { resolve, reject };
    });
  }

  answer(receipts: CommandReceipt[]): void {
    this.settle?.resolve(receipts);
    this.settle = null;
  }

  fail(failure: unknown): void {
    this.settle?.reject(failure);
    this.settle = null;
  }
}
