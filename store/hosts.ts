/** Hosts, and the tokens they register with. */
import { createHash, randomBytes } from 'node:crypto';
import type { Host, HostGpu, Registration, RegistrationOutcome } from '../api/catalogue.js';
import type { Db } from './db.js';

export type { Host, HostGpu, Registration, RegistrationOutcome } from '../api/catalogue.js';

interface Row {
  id: string;
  gpus: HostGpu[];
  host_ram_bytes: number | null;
  settings: Record<string, unknown>;
  draining: boolean;
  registered_at: Date;
  last_seen_at: Date;
}

const fromRow = (r: Row): Host => ({
  id: r.id,
  gpus: r.gpus,
  hostRamBytes: r.host_ram_bytes,
  settings: r.settings,
  draining: r.draining,
  registeredAt: r.registered_at,
  lastSeenAt: r.last_seen_at,
});

const sha256 = (token: string) => createHash('sha256').update(token).digest('hex');

/** A new host token; only its hash is stored, so the caller shows it once. */
export async function issueHostToken(db: Db): Promise<string> {
  const token = `capy_host_${randomBytes(24).toString('base64url')}`;
  await db.query('INSERT INTO host_tokens (token_sha256) VALUES ($1)', [sha256(token)]);
  return token;
}

const UNIQUE_VIOLATION = '23505';

/** A new secret for a host's ingress: the server sends it with every request it forwards there. */
export const newIngressSecret = () => randomBytes(32).toString('base64url');

/**
 * Registers (or re-registers) a host with a token the server issued. `ingressSecret` replaces the
 * host's in the same write: a host agent gets a new one at each registration (kept apart from
 * `Host`, which workflows read, so that no Temporal history holds it).
 */
export async function registerHost(
  db: Db,
  token: string,
  host: Registration,
  ingressSecret?: string,
): Promise<RegistrationOutcome> {
  try {
    return await db.transaction(async (tx) => {
      const [bound] = await tx.query<{ host_id: string | null }>(
        'SELECT host_id FROM host_tokens WHERE token_sha256 = $1 FOR UPDATE',
        [sha256(token)],
      );
      if (!bound) return 'unknown_token';
      if (bound.host_id !== null && bound.host_id !== host.id) return 'token_bound_to_another_host';
      if (bound.host_id === null) {
        const taken = await tx.query('SELECT 1 FROM host_tokens WHERE host_id = $1', [host.id]);
        if (taken.length > 0) return 'host_bound_to_another_token';
        await tx.query('UPDATE host_tokens SET host_id = $2 WHERE token_sha256 = $1', [sha256(token), host.id]);
      }
      await tx.query(
        `INSERT INTO hosts (id, gpus, host_ram_bytes, settings, ingress_secret)
         VALUES ($1, $2::jsonb, $3, $4::jsonb, $5)
         ON CONFLICT (id) DO UPDATE SET gpus = EXCLUDED.gpus, host_ram_bytes = EXCLUDED.host_ram_bytes,
           settings = EXCLUDED.settings, last_seen_at = now(),
           ingress_secret = COALESCE(EXCLUDED.ingress_secret, hosts.ingress_secret)`,
        [host.id, JSON.stringify(host.gpus), host.hostRamBytes, JSON.stringify(host.settings), ingressSecret ?? null],
      );
      return 'registered';
    });
  } catch (e) {
    // Two new tokens registering one host ID at once: the index lets the first bind it.
    if ((e as { code?: string }).code === UNIQUE_VIOLATION) return 'host_bound_to_another_token';
    throw e;
  }
}

/**
 * Revokes the token a host registered with, so that a new one may register that host ID (the
 * operator's explicit act of re-binding it). Returns how many tokens it revoked.
 */
export async function revokeHostToken(db: Db, hostId: string): Promise<number> {
  return (await db.query('DELETE FROM host_tokens WHERE host_id = $1 RETURNING 1', [hostId])).length;
}

/** Each host's ingress secret, by host ID; a host that has not registered since secrets came has none. */
export async function ingressSecrets(db: Db): Promise<Map<string, string>> {
  const rows = await db.query<{ id: string; ingress_secret: string }>(
    'SELECT id, ingress_secret FROM hosts WHERE ingress_secret IS NOT NULL',
  );
  return new Map(rows.map((r) => [r.id, r.ingress_secret]));
}

/** The host a token is bound to; undefined for an unknown token or one no host registered with yet. */
export async function hostForToken(db: Db, token: string): Promise<string | undefined> {
  const [row] = await db.query<{ host_id: string | null }>('SELECT host_id FROM host_tokens WHERE token_sha256 = $1', [
    sha256(token),
  ]);
  return row?.host_id ?? undefined;
}

export async function findHost(db: Db, id: string): Promise<Host | undefined> {
  const [row] = await db.query<Row>('SELECT * FROM hosts WHERE id = $1', [id]);
  return row && fromRow(row);
}

export async function listHosts(db: Db): Promise<Host[]> {
  return (await db.query<Row>('SELECT * FROM hosts ORDER BY id')).map(fromRow);
}

/** Records when the host last reported; an older time than the one stored is ignored. */
export async function markHostSeen(db: Db, id: string, at: Date): Promise<void> {
  await db.query('UPDATE hosts SET last_seen_at = GREATEST(last_seen_at, $2) WHERE id = $1', [id, at]);
}

export async function setHostDraining(db: Db, id: string, draining: boolean): Promise<void> {
  await db.query('UPDATE hosts SET draining = $2 WHERE id = $1', [id, draining]);
}
