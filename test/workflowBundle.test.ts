/**
 * The workflow modules are evaluated once per worker thread and shared by every run
 * (server/workflowBundle.ts preloads them), so none may hold state a run could change: eslint refuses
 * it (eslint.config.js) in every module the bundle holds. The bundle's source map, which a worker's
 * stacks are named by, names the files of the checkout that runs it.
 */
import { execFile } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { promisify } from 'node:util';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';
import { NOT_SOURCES, PROJECT_ROOT } from '../bin/sourceKey.js';
import { workflowBundle } from '../server/workflowBundle.js';

const SHARED_STATE = [
  'workflow modules are shared by every run: module-level bindings are const',
  'workflow modules are shared by every run: a module-level Map or Set is ReadonlyMap or ReadonlySet',
];

/** The project's own modules in the bundle, as paths from the root. */
const ownModules = (code: string) =>
  [...new Set([...code.matchAll(/"\.\/([\w./-]+\.ts)"/g)].map((m) => m[1]!))].filter(
    (path) => !path.startsWith('node_modules/'),
  );

describe('the workflow bundle', async () => {
  const code = readFileSync((await workflowBundle()).codePath, 'utf8');
  const eslint = new ESLint({ cwd: PROJECT_ROOT });

  it('evaluates the workflow modules before any run, once per worker thread', () => {
    const preload = code.slice(code.indexOf('function preloadModules()'), code.indexOf('exports.importWorkflows'));
    expect(preload).toContain('"./workflows/index.ts"');
  });

  it('holds only modules where eslint refuses state a run could change', async () => {
    const modules = ownModules(code);
    expect(modules).toContain('workflows/switch.ts');
    expect(modules).toContain('domain/catalogue.ts');
    for (const path of modules) {
      const config = await eslint.calculateConfigForFile(join(PROJECT_ROOT, path));
      expect(JSON.stringify(config.rules?.['no-restricted-syntax'] ?? 'no such rule'), path).toContain(SHARED_STATE[1]);
    }
  });

  it('refuses a module-level let, var or writable Map or Set there, and nothing read-only or local', async () => {
    const lint = async (text: string) =>
      (await eslint.lintText(text, { filePath: join(PROJECT_ROOT, 'workflows', 'sharedState.ts') }))[0]!.messages
        .filter((m) => m.ruleId === 'no-restricted-syntax')
        .map((m) => `${m.line}: ${m.message}`);
    expect(
      await lint(
        [
          'export let runs = 0;',
          'var seen = 0;',
          'const byRun = new Map<string, number>();',
          'export const names = new Set<string>();',
          'export const count = () => runs + seen + byRun.size + names.size;',
        ].join('\n'),
      ),
    ).toEqual([`1: ${SHARED_STATE[0]}`, `2: ${SHARED_STATE[0]}`, `3: ${SHARED_STATE[1]}`, `4: ${SHARED_STATE[1]}`]);
    expect(
      await lint(
        [
          "const states: ReadonlySet<string> = new Set(['ready']);",
          'export const limits: ReadonlyMap<string, number> = new Map();',
          'export function tally() {',
          '  const seen = new Map<string, number>();',
          '  let n = seen.size;',
          '  n += states.size + limits.size;',
          '  return n;',
          '}',
        ].join('\n'),
      ),
    ).toEqual([]);
  });

  it("names the files of the checkout that made it, not another copy's of the same code", async () => {
    // A copy of the code elsewhere, as a second clone is: every source the bundles are keyed by.
    const copy = mkdtempSync(join(tmpdir(), 'capyctl-clone-'));
    cpSync(PROJECT_ROOT, copy, { recursive: true, filter: (from) => !NOT_SOURCES.has(basename(from)) });
    symlinkSync(realpathSync(join(PROJECT_ROOT, 'node_modules')), join(copy, 'node_modules'));
    let codePath = '';
    try {
      const script = "console.log((await (await import('./server/workflowBundle.ts')).workflowBundle()).codePath)";
      const { stdout } = await promisify(execFile)(
        process.execPath,
        ['--import', 'tsx', '--input-type=module', '-e', script],
        { cwd: copy },
      );
      codePath = stdout.trim();
      const [, map] = /sourceMappingURL=data:application\/json;charset=utf-8;base64,(\S+)\s*$/.exec(
        readFileSync(codePath, 'utf8'),
      )!;
      const sources = (JSON.parse(Buffer.from(map!, 'base64').toString('utf8')) as { sources: string[] }).sources;
      const own = sources.filter((path) => path.endsWith('.ts') && !path.includes('/node_modules/'));
      expect(own).toContain(join(copy, 'workflows/switch.ts'));
      for (const path of own) expect(path.startsWith(`${copy}/`) && existsSync(path), path).toBe(true);
    } finally {
      rmSync(copy, { recursive: true, force: true });
      // The copy's own bundle; this checkout's, which other tests are using, stays.
      if (codePath !== '' && codePath !== (await workflowBundle()).codePath) rmSync(codePath, { force: true });
    }
  }, 60_000);
});
