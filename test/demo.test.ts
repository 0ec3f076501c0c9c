/**
 * `npm run demo` against a running standalone on its example models: the timeline it observes must
 * be the spec's "Example: two apps, one GPU", row by row, with the default admission window.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, inject, it } from 'vitest';
import type { SwitchSeen } from '../deploy/demo/switchHistory.js';
import type { TimelineEvent } from '../deploy/demo/timeline.js';
import type { DemoRun } from '../deploy/demo/twoApps.js';
import { type StandaloneProcess, startStandaloneProcess } from './support/standalone.js';

const REPO = fileURLToPath(new URL('..', import.meta.url));
/** The spec's default admission window: the standalone runs on its defaults. */
const WINDOW_MS = 2_000;

type Observed = DemoRun & { timeline: TimelineEvent[]; switches: SwitchSeen[] };

function runDemo(s: StandaloneProcess): Promise<Observed> {
  const args = [
    'run',
    '--silent',
    'demo',
    '--',
    '--json',
    '--inference',
    s.inferenceUrl,
    '--server',
    s.managementUrl,
    '--temporal',
    inject('temporalAddress'),
  ];
  return new Promise((resolve, reject) => {
    execFile(
      'npm',
      args,
      { cwd: REPO, env: { ...process.env, CAPYCTL_ADMIN_TOKEN: s.adminToken } },
      (error, stdout, stderr) =>
        error
          ? reject(new Error(`npm run demo failed: ${error.message}\n${stderr}`))
          : resolve(JSON.parse(stdout) as Observed),
    );
  });
}

describe('the demo of two apps on one GPU', () => {
  let standalone: StandaloneProcess | undefined;
  afterAll(async () => {
    await standalone?.stop();
  });

  it("observes the spec's timeline", { timeout: 240_000 }, async () => {
    standalone = await startStandaloneProcess({
      temporalAddress: inject('temporalAddress'),
      dir: mkdtempSync(join(tmpdir(), 'capyctl-demo-')),
    });
    const seen = await runDemo(standalone);
    const [there, back] = seen.switches;
    const stepAt = (s: SwitchSeen | undefined, step: string) =>
      s?.steps.find((x) => x.step === step)?.atMs ?? Number.NaN;
    // A step's time is its activity's completion, recorded after the step took effect: the waiters a
    // release lets go may answer before it is recorded. So answers are compared with the step before,
    // the target starting or waking: no output comes before the model is back.
    const readyAt = (s: SwitchSeen | undefined) =>
      s?.steps.find((x) => x.step === 'started' || x.step === 'woke')?.atMs ?? Number.NaN;

    // 0 s: App 2's three requests wait; one switch begins, for chat-b, at the expense of chat-a.
    expect(there).toMatchObject({ target: 'chat-b', victims: ['chat-a'] });
    expect(there!.startedAtMs - seen.zeroMs).toBeLessThan(3_000);
    expect(there!.steps.map((x) => x.step)).toEqual([
      'admission closed',
      'drained',
      'began parking',
      'parked',
      expect.stringMatching(/^(started|woke)$/),
      'released its waiters',
    ]);

    // 0 to 2 s: chat-a still takes App 1's new requests; 2 s: it takes none.
    const closed = stepAt(there, 'admission closed');
    expect(closed - there!.startedAtMs).toBeGreaterThanOrEqual(WINDOW_MS - 50);
    expect(closed - there!.startedAtMs).toBeLessThan(WINDOW_MS + 1_500);
    const app1 = seen.requests.filter((r) => r.app === 1);
    for (const r of app1.filter((x) => x.sentAtMs >= there!.startedAtMs && x.sentAtMs < closed - 100))
      expect(r.status).toBe(200);

    // After 2 s, while chat-a finishes its work, App 1's requests are answered 503 dispatch closed...
    const beganParking = stepAt(there, 'began parking');
    const refused = app1.filter((r) => r.status === 503);
    expect(refused.length).toBeGreaterThan(0);
    for (const r of refused) {
      expect(r.error).toMatch(/^dispatch to deployment 01[0-9A-Z]{24} is closed; retry shortly$/);
      expect(r.endedAtMs).toBeGreaterThanOrEqual(closed);
      expect(r.sentAtMs).toBeLessThanOrEqual(beganParking);
    }

    // chat-b ready: App 2's three requests run together.
    const released = stepAt(there, 'released its waiters');
    const app2 = seen.requests.filter((r) => r.app === 2);
    expect(app2.map((r) => r.status)).toEqual([200, 200, 200]);
    const firstOutputs = app2.map((r) => r.firstOutputAtMs!);
    expect(Math.min(...firstOutputs)).toBeGreaterThanOrEqual(readyAt(there));
    expect(Math.max(...firstOutputs) - Math.min(...firstOutputs)).toBeLessThan(300);

    // Next: once chat-a began parking, App 1's requests wait instead, and become the switch back.
    expect(back).toMatchObject({ target: 'chat-a', victims: ['chat-b'] });
    expect(back!.startedAtMs).toBeGreaterThanOrEqual(released);
    const waited = app1.filter((r) => r.sentAtMs > beganParking && r.sentAtMs < back!.startedAtMs);
    expect(waited.length).toBeGreaterThan(0);
    for (const r of waited) {
      expect(r.status).toBe(200);
      expect(r.firstOutputAtMs!).toBeGreaterThanOrEqual(readyAt(back));
    }
    expect(seen.timeline[0]).toEqual({ atS: 0, what: 'App 2 sends 3 requests for chat-b; they wait' });
  });
});
