/**
 * A newcomer's first minutes: README.md's two commands, as written, on a fresh clone of this
 * repository. The main job must come up and switch between its two example models; the test
 * command must be the one CI runs, and pass (narrowed to one small file, since running the whole
 * suite from inside itself would never end).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { resolveTemporalCli } from '../standalone/temporalDevServer.js';
import { readmeShBlocks, REPO, shell } from './support/readme.js';
import { readyLineOf } from './support/standalone.js';
import { until } from './support/until.js';

/** The Temporal CLI this machine has (a newcomer's first run builds it: the same script, minutes slower). */
const TEMPORAL_BIN = process.env.CAPYCTL_TEMPORAL_BIN ?? (await resolveTemporalCli());

/**
 * The `sh` blocks of the README's "On a fresh machine" section: the main job, then the test
 * command, which must be the one CI runs (the last line of .ci/run).
 */
function freshMachineCommands(): { mainJob: string; tests: string } {
  const blocks = readmeShBlocks('## On a fresh machine');
  expect(blocks).toHaveLength(2);
  const ciCommand = readFileSync(join(REPO, '.ci', 'run'), 'utf8')
    .trim()
    .split('\n')
    .pop();
  expect(blocks[1]).toBe(ciCommand);
  return { mainJob: blocks[0]!, tests: blocks[1]! };
}

/** The environment a person's shell has, with the Temporal CLI this machine has. */
const env = { ...process.env, CAPYCTL_TEMPORAL_BIN: TEMPORAL_BIN, CAPYCTL_LOG_FORMAT: 'json' };

async function chat(model: string) {
  const reply = await request('http://127.0.0.1:8080/v1/chat/completions', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 8 }),
  });
  return {
    status: reply.statusCode,
    body: (await reply.body.json()) as { model: string; choices: Array<{ message: { content: string } }> },
  };
}

describe("README.md's two commands on a fresh clone", () => {
  const clone = join(mkdtempSync(join(tmpdir(), 'capyctl-readme-')), 'capyctl');
  execFileSync('git', ['clone', '--quiet', REPO, clone]);
  const { mainJob, tests } = freshMachineCommands();

  it(
    'the main job starts the standalone, which answers two example models with a switch between them',
    { timeout: 420_000 },
    async () => {
      const run = shell(mainJob, clone, env);
      let standalonePid: number | undefined;
      try {
        const ready = await until(
          'the standalone to be ready',
          () => {
            if (run.child.exitCode !== null)
              throw new Error(`\`${mainJob}\` exited with ${run.child.exitCode}:\n${run.output()}`);
            return readyLineOf(run.output());
          },
          300_000,
        );
        standalonePid = ready.pid;
        expect(ready.adminTokenFile).toBe(join(clone, '.data', 'admin-token'));
        expect(ready.temporalUiUrl).toBe('http://127.0.0.1:8233');

        for (const model of ['chat-a', 'chat-b']) {
          const reply = await chat(model);
          expect(reply.status).toBe(200);
          expect(reply.body.model).toBe(model);
          expect(reply.body.choices[0]!.message.content.split(' ')).toHaveLength(8);
        }
        const load = await request('http://127.0.0.1:7443/management/v1/metrics/load', {
          headers: { authorization: `Bearer ${readFileSync(ready.adminTokenFile, 'utf8').trim()}` },
        });
        const states = (
          (await load.body.json()) as {
            deployments: Array<{ name: string; instances: Array<{ observed_state: string }> }>;
          }
        ).deployments.map((d) => [d.name, d.instances.map((i) => i.observed_state)]);
        // chat-b needed chat-a's memory: a switch parked chat-a.
        expect(Object.fromEntries(states)).toEqual({ 'chat-a': ['parked'], 'chat-b': ['ready'] });

        process.kill(ready.pid, 'SIGTERM');
        expect(await run.exited).toBe(0);
      } finally {
        // A failed run leaves nothing behind: the standalone stops its engines and dev server itself.
        if (run.child.exitCode === null) {
          if (standalonePid !== undefined) process.kill(standalonePid, 'SIGTERM');
          else process.kill(-run.child.pid!, 'SIGKILL');
        }
        await run.exited;
      }
    },
  );

  // After the main job's `npm ci` in the same clone, as a newcomer runs them.
  it('the test command passes', { timeout: 420_000 }, async () => {
    const run = shell(`${tests} -- test/catalogue.test.ts`, clone, env);
    const code = await run.exited;
    expect(code, run.output()).toBe(0);
    // Colours stripped: vitest colours its summary when its parent asked for colour.
    expect(run.output().replace(/\x1b\[[0-9;]*m/g, '')).toMatch(/Test Files {2}1 passed \(1\)/);
  });
});
