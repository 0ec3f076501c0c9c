/** The standalone's admin token: made on the first start, kept in a file only its owner can read. */
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** Where the standalone keeps it, under its data folder; the CLI reads the same file. */
export const ADMIN_TOKEN_FILE = 'admin-token';

export interface AdminToken {
  token: string;
  file: string;
  /** Made by this start, not read from an earlier one. */
  created: boolean;
}

export function adminTokenIn(dataDir: string): AdminToken {
  const file = join(dataDir, ADMIN_TOKEN_FILE);
  try {
    const token = readFileSync(file, 'utf8').trim();
    if (token !== '') return { token, file, created: false };
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
  const token = `capy_admin_${randomBytes(24).toString('base64url')}`;
  writeFileSync(file, `${token}\n`, { mode: 0o600 });
  return { token, file, created: true };
}
