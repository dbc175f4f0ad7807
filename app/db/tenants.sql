-- Tenants, their API keys and their signing secrets: the statements of app/db/tenants.py.
-- Named blocks, loaded by app/db/queries.py (which says how they are written).

-- name: create_tenant
-- ON CONFLICT turns a duplicate into "no row", which the service answers with 409.
INSERT INTO tenants (id, signing_secret) VALUES (:id, :signing_secret)
ON CONFLICT (id) DO NOTHING
RETURNING id, created_at;

-- name: tenant_exists
SELECT EXISTS (SELECT 1 FROM tenants WHERE id = :id);

-- name: insert_api_key
INSERT INTO api_keys (id, tenant_id, salt, hash, scopes)
VALUES (:id, :tenant_id, :salt, :hash, CAST(:scopes AS text[]));

-- name: list_api_keys
SELECT id, created_at, revoked_at, scopes FROM api_keys WHERE tenant_id = :tenant_id ORDER BY created_at, id;

-- name: revoke_api_key
-- Revoking twice keeps the first revocation's time; a key of another tenant matches nothing.
UPDATE api_keys SET revoked_at = COALESCE(revoked_at, now())
WHERE id = :id AND tenant_id = :tenant_id
RETURNING id;

-- name: get_api_key
-- Looked up by the key's public id; the secret part is verified against the salted hash in Python.
SELECT tenant_id, salt, hash, scopes FROM api_keys WHERE id = :id AND revoked_at IS NULL;

-- name: get_signing_secrets
-- The previous secret only while its rotation overlap lasts, with how long it still does: the
-- worker's cache ends there, so the overlap is timed by the database's clock, not a worker's.
SELECT signing_secret,
       CASE WHEN previous_expires_at > now() THEN previous_signing_secret END AS previous_signing_secret,
       CASE WHEN previous_expires_at > now()
            THEN CAST(EXTRACT(EPOCH FROM previous_expires_at - now()) AS float8) END AS previous_valid_seconds
FROM tenants WHERE id = :id;

-- name: rotate_signing_secret
-- The current secret becomes the previous one, valid for the overlap. One previous secret at a
-- time: rotating again within an overlap retires the oldest at once (what a leaked secret needs).
UPDATE tenants
SET previous_signing_secret = signing_secret,
    previous_expires_at = now() + make_interval(secs => :overlap_seconds),
    signing_secret = :signing_secret
WHERE id = :id
RETURNING previous_expires_at;

-- name: list_tenants
-- The admin's view: tenants by id (keyset), each with its keys' ids and dates, never their hashes.
SELECT t.id, t.created_at, t.paused,
       COALESCE((SELECT json_agg(json_build_object('key_id', replace(k.id::text, '-', ''),
                                                   'created_at', k.created_at,
                                                   'revoked_at', k.revoked_at,
                                                   'scopes', k.scopes) ORDER BY k.created_at)
                 FROM api_keys k WHERE k.tenant_id = t.id), '[]') AS keys
FROM tenants t
WHERE t.id > :after
ORDER BY t.id
LIMIT :limit;
