-- A host ID belongs to the token it first registered with: another token registering it is
-- refused until an operator revokes the first (`capyctl revoke host-token`). Hosts that were taken
-- over before this rule keep the token they registered with first; the later ones are revoked.
DELETE FROM host_tokens t
 WHERE t.host_id IS NOT NULL
   AND EXISTS (SELECT 1 FROM host_tokens first
                WHERE first.host_id = t.host_id
                  AND (first.created_at, first.token_sha256) < (t.created_at, t.token_sha256));
CREATE UNIQUE INDEX host_tokens_one_per_host ON host_tokens (host_id) WHERE host_id IS NOT NULL;
