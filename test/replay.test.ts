/**
 * The workflows as they are now replay the histories recorded from a running capyctl
 * (`test/fixtures/histories`, made by `scripts/recordHistories.ts`). A workflow running when a server
 * is upgraded is replayed by the new code: a step added, removed or reordered without `patched()`
 * fails it, and fails here first. Recorded again when such a change is meant (see the script).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils.js';
import { Worker } from '@temporalio/worker';
import { describe, expect, it } from 'vitest';
import { workflowBundle } from '../server/workflowBundle.js';

const DIR = join(import.meta.dirname, 'fixtures/histories');
const recorded = readdirSync(DIR)
  .filter((f) => f.endsWith('.json'))
  .sort();

describe('replaying recorded histories', () => {
  it('keeps a switch of each kind and the host scheduler', () => {
    const kinds = recorded.map((f) => f.split('_')[0]!.split('-')[0]);
    expect(new Set(kinds)).toEqual(new Set(['switch', 'host']));
    expect(recorded.length).toBeGreaterThanOrEqual(4);
  });

  it('replays every one with the workflow code as it is now', async () => {
    const histories = recorded.map((file) => ({
      workflowId: file.replace(/\.json$/, ''),
      history: historyFromJSON(JSON.parse(readFileSync(join(DIR, file), 'utf8'))),
    }));
    const failures: string[] = [];
    for await (const result of Worker.runReplayHistories({ workflowBundle: await workflowBundle() }, histories)) {
      if (result.error) failures.push(`${result.workflowId}: ${String(result.error)}`);
    }
    expect(failures).toEqual([]);
  });
});
