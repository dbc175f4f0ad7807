-- Dashboard sessions and one-time sign-in links, by the hash of their token: the statements of
-- app/db/ui_sessions.py.
-- Named blocks, loaded by app/db/queries.py (which says how they are written).

-- name: insert_ui_session
-- A dashboard session or a one-time sign-in link (kind). Expired rows of either kind go on the way
-- in, a bounded number at a time, so the table holds what is live and never needs its own task.
WITH expired AS (
    DELETE FROM ui_sessions WHERE token_hash IN (
        SELECT token_hash FROM ui_sessions WHERE expires_at < now() LIMIT 100)
)
INSERT INTO ui_sessions (token_hash, kind, tenant_id, key_id, csrf_token, expires_at)
VALUES (:token_hash, :kind, :tenant_id, :key_id, :csrf_token, now() + make_interval(secs => :ttl_seconds));

-- name: get_ui_session
-- A live session: not expired, and for a tenant, opened with a key that is still not revoked;
-- a tenant's session has its key's scopes (the admin's, key_id NULL, has no key and every scope).
SELECT s.tenant_id, s.key_id, s.csrf_token, k.scopes
FROM ui_sessions s
LEFT JOIN api_keys k ON k.id = s.key_id
WHERE s.token_hash = :token_hash AND s.kind = 'session' AND s.expires_at > now()
  AND (s.key_id IS NULL OR k.revoked_at IS NULL);

-- name: take_ui_link
-- Redeems a one-time link: the delete is the redemption, so two clicks cannot both succeed.
DELETE FROM ui_sessions
WHERE token_hash = :token_hash AND kind = 'link' AND expires_at > now()
RETURNING tenant_id, key_id;

-- name: delete_ui_session
DELETE FROM ui_sessions WHERE token_hash = :token_hash AND kind = 'session';
