/**
 * The import picture between folders (scripts/importPicture.ts, `npm run imports`): no circle between
 * top-level folders, `domain/` imports no other, and production code reaches neither the simulator
 * (but through `capyctl sim`), nor test support, the benchmarks, deploy/ or the scripts.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { drawFolders, readImportPicture } from '../scripts/importPicture.js';

const trees: string[] = [];

/** A project of its own: each file's source by its path. */
function tree(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'capyctl-imports-'));
  trees.push(root);
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  return root;
}

afterEach(() => {
  for (const root of trees.splice(0)) rmSync(root, { recursive: true, force: true });
});

describe('the import picture', () => {
  it('of this project has no circle between folders and no arrow from production into what is not the product', () => {
    const picture = readImportPicture();
    expect(picture.problems.join('\n\n')).toBe('');
    expect(drawFolders(picture)).toMatch(/^domain -> nothing$/m);
  });

  it('counts every kind of relative import, folder by folder', () => {
    const root = tree({
      'domain/words.ts': 'export const word = 1;\n',
      'settings/a.ts':
        "import { word } from '../domain/words.js';\nimport type { T } from '../store/t.js';\nexport * from '../store/t.js';\n",
      'store/t.ts':
        "export type T = number;\nexport const later = () => import('../domain/words.js');\nimport { z } from 'zod';\n",
    });
    expect(drawFolders(readImportPicture(root))).toBe(
      'domain -> nothing\nsettings -> domain (1), store (2)\nstore -> domain (1)',
    );
  });

  it('names the files of a circle between folders', () => {
    const root = tree({
      'gateway/route.ts': "import { placed } from '../server/placement.js';\n",
      'server/placement.ts': "import type { Table } from '../gateway/table.js';\n",
      'gateway/table.ts': 'export type Table = number;\n',
    });
    expect(readImportPicture(root).problems).toEqual([
      'a circle between gateway, server:\n    gateway/route.ts imports server/placement.js\n    server/placement.ts imports gateway/table.js',
    ]);
  });

  it('names production files that import the simulator, test support or deploy/, and lets `capyctl sim` launch the simulator', () => {
    const root = tree({
      'hostAgent/agent.ts':
        "import { gpu } from '../simulator/gpu.js';\nimport { port } from '../test/support/ports.js';\n",
      'cli/commands/sim.ts': "const run = () => import('../../simulator/server.js');\n",
      'standalone/standalone.ts': "import { dev } from '../deploy/devServer.js';\n",
      'test/support/ports.ts': "import { gpu } from '../../simulator/gpu.js';\n",
    });
    expect(readImportPicture(root).problems.sort()).toEqual([
      'production (hostAgent/) imports simulator/, which is not the product:\n    hostAgent/agent.ts imports simulator/gpu.js',
      'production (hostAgent/) imports test/, which is not the product:\n    hostAgent/agent.ts imports test/support/ports.js',
      'production (standalone/) imports deploy/, which is not the product:\n    standalone/standalone.ts imports deploy/devServer.js',
    ]);
  });

  it('keeps domain/ innermost', () => {
    const root = tree({ 'domain/catalogue.ts': "import { header } from '../net/ingress.js';\n" });
    expect(readImportPicture(root).problems).toEqual([
      'domain/ imports net/; it must import no other folder:\n    domain/catalogue.ts imports net/ingress.js',
    ]);
  });
});
