/** The standalone's admin token: made on the first start, kept in a file only its owner can read. */
import { randomBytes } from 'node:crypto';
import { chmodSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';

/** Where the standalone keeps it, under its data folder; the CLI reads the same file. */
export const ADMIN_TOKEN_FILE = 'admin-token';

/** Read and write for its owner only. */
const OWNER_ONLY = 0o600;

export interface AdminToken {
  token: string;
  file: string;
  /** Made by this start, not read from an earlier one. */
  created: boolean;
}

/**
 * The token an earlier start made, or a new one. A file its group or others may read (copied in, or
 * made under a loose umask by hand) is made the owner's only, with a warning: the token may have
 * been read, and a new one is made by deleting the file.
 */
export function adminTokenIn(dataDir: string, logger: Logger): AdminToken {
  const file = join(dataDir, ADMIN_TOKEN_FILE);
  try {
    const token = readFileSync(file, 'utf8').trim();
    if (token !== '') {
      const mode = statSync(file).mode & 0o777;
      if ((mode & ~OWNER_ONLY) !== 0) {
        chmodSync(file, OWNER_ONLY);
        logger.warn(
          { file, mode: mode.toString(8), now: OWNER_ONLY.toString(8) },
          'the admin token file could be read by other users; it is now its owner’s only (0600); ' +
            'if others may have read it, delete it and start again for a new token',
        );
      }
      return { token, file, created: false };
    }
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
  const token = `capy_admin_${randomBytes(24).toString('base64url')}`;
  writeFileSync(file, `${token}\n`, { mode: OWNER_ONLY });
  // The mode above applies to a new file only: an empty one left before keeps its own.
  chmodSync(file, OWNER_ONLY);
  return { token, file, created: true };
}
