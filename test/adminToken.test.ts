/** The standalone's admin token file: made for its owner only, and made so again when it was not. */
import { chmodSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { adminTokenIn } from '../standalone/adminToken.js';

/** A logger whose JSON lines the test reads. */
function recordingLogger() {
  const lines: Array<Record<string, unknown>> = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line)) });
  return { logger, lines };
}

const modeOf = (file: string) => statSync(file).mode & 0o777;

describe('the admin token file', () => {
  it('is made readable by its owner only, and read back the same on the next start', () => {
    const dir = mkdtempSync(join(tmpdir(), 'capyctl-token-'));
    const { logger, lines } = recordingLogger();
    const first = adminTokenIn(dir, logger);
    expect(first).toMatchObject({ token: expect.stringMatching(/^capy_admin_/), created: true });
    expect(modeOf(first.file)).toBe(0o600);
    expect(adminTokenIn(dir, logger)).toEqual({ ...first, created: false });
    expect(lines).toEqual([]);
  });

  it('found readable by others, is made its owner’s only, with a warning naming the file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'capyctl-token-'));
    const file = join(dir, 'admin-token');
    writeFileSync(file, 'capy_admin_copied\n');
    chmodSync(file, 0o644);
    const { logger, lines } = recordingLogger();
    expect(adminTokenIn(dir, logger)).toEqual({ token: 'capy_admin_copied', file, created: false });
    expect(modeOf(file)).toBe(0o600);
    expect(lines).toEqual([
      expect.objectContaining({
        level: 40,
        file,
        mode: '644',
        now: '600',
        msg: 'the admin token file could be read by other users; it is now its owner’s only (0600); if others may have read it, delete it and start again for a new token',
      }),
    ]);
  });

  it('found empty and readable by others, gets a new token its owner alone can read', () => {
    const dir = mkdtempSync(join(tmpdir(), 'capyctl-token-'));
    const file = join(dir, 'admin-token');
    writeFileSync(file, '');
    chmodSync(file, 0o666);
    const { logger } = recordingLogger();
    const made = adminTokenIn(dir, logger);
    expect(made.created).toBe(true);
    expect(readFileSync(file, 'utf8')).toBe(`${made.token}\n`);
    expect(modeOf(file)).toBe(0o600);
  });
});
