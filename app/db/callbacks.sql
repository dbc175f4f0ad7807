-- The callback outbox (run_callbacks): delivery states, the deliverers' claim and their outcomes.
-- The statements of app/db/callbacks.py.
-- Named blocks, loaded by app/db/queries.py (which says how they are written).

-- name: callback_delivery_states
-- The latest callback obligation of each run (a run retried and ended again owes another).
SELECT DISTINCT ON (run_id) run_id, status, attempts, last_error FROM run_callbacks
WHERE run_id = ANY(CAST(:run_ids AS uuid[]))
ORDER BY run_id, id DESC;

-- name: claim_callbacks
-- A deliverer takes due callbacks, and ones whose claim lapsed (a worker killed mid-delivery), at
-- most :per_tenant of each tenant counting those it already delivers (:busy_*): a tenant whose
-- receiver hangs fills its own share, never the others'. The claim bumps the fence and counts the
-- attempt; due_at becomes the claim's expiry. The outbox holds only what is owed, so the ranking is
-- over a small set; the locking is its own step (FOR UPDATE cannot sit beside a window function).
WITH due AS (
    SELECT id, tenant_id, row_number() OVER (PARTITION BY tenant_id ORDER BY due_at, id) AS rank
    FROM run_callbacks
    WHERE status IN ('pending', 'delivering') AND due_at <= now()
),
busy AS (
    SELECT b.tenant_id, b.n
    FROM unnest(CAST(:busy_tenants AS text[]), CAST(:busy_counts AS integer[])) AS b(tenant_id, n)
),
chosen AS (
    SELECT c.id FROM run_callbacks c
    JOIN due d ON d.id = c.id
    LEFT JOIN busy ON busy.tenant_id = d.tenant_id
    WHERE d.rank + COALESCE(busy.n, 0) <= :per_tenant
      AND c.status IN ('pending', 'delivering') AND c.due_at <= now()
    ORDER BY c.due_at
    LIMIT :limit
    FOR UPDATE OF c SKIP LOCKED
)
UPDATE run_callbacks c SET status = 'delivering', epoch = c.epoch + 1, attempts = c.attempts + 1,
    lease_owner = :owner, due_at = now() + make_interval(secs => :lease_seconds)
FROM chosen
WHERE c.id = chosen.id
RETURNING c.id, c.run_id, c.group_id, c.tenant_id, c.url, c.epoch, c.attempts;

-- name: finish_callback
-- One delivery's outcome, fenced on the claim's epoch: a deliverer whose claim lapsed and was taken
-- again records nothing. A failure is retried after jittered exponential backoff (capped), until
-- :max_attempts attempts have been made.
UPDATE run_callbacks c SET
    status = CASE WHEN :ok THEN 'delivered' WHEN c.attempts >= :max_attempts THEN 'failed' ELSE 'pending' END,
    due_at = CASE WHEN :ok OR c.attempts >= :max_attempts THEN c.due_at
                  ELSE now() + make_interval(secs => least(:backoff_seconds * power(2, c.attempts - 1),
                                                           :max_backoff_seconds) * (0.75 + random() * 0.5))
             END,
    finished_at = CASE WHEN :ok OR c.attempts >= :max_attempts THEN now() END,
    last_error = CASE WHEN :ok THEN c.last_error ELSE :error END,
    lease_owner = NULL
WHERE c.id = :id AND c.epoch = :epoch AND c.status = 'delivering'
RETURNING c.status;
