-- Every runtime statement of the scheduler, as named blocks: `-- name: <stem>`, a comment saying
-- why, then the SQL. Binds are named (`:tenant_id`); app/db/queries.py compiles them to asyncpg's
-- positional form once, at import. Repositories run them by name; nothing else builds SQL.
-- The tables, functions and triggers they run against are app/db/schema/.
--
-- A statement that writes job_runs names, under its name, the triggers its writes may fire
-- (`-- fires: ...`, from app/db/schema/: the run_queue triggers keep the queue, job_runs_flow_control
-- can rewrite due_at and held behind the statement, job_runs_record_callback writes the outbox,
-- job_runs_failure_streak may pause the job). tests/unit/test_query_fires.py checks each line;
-- `python -m tests.query_triggers` rewrites them all from the schema.

-- ───────────────────────────── tenants and keys ─────────────────────────────

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

-- ─────────────────────────────────── jobs ───────────────────────────────────

-- name: upsert_job
-- xmax = 0 only on a freshly inserted row: it tells 201 from 200 in one round trip. A payload of
-- JSON null arrives as SQL NULL (the driver never encodes None) and is stored as JSON null. No tags
-- are stored as NULL, which a run copies at no cost (scheduler_run_tags, migration 0022).
-- `paused` false resumes, as POST …/resume does: a job's failure streak starts again from 0, as it does when its
-- pause_after_failures goes; a pause keeps its reason (a job paused after failures stays so). A
-- schedule that stays as it was, running, keeps its next fire when that is later: the materializer
-- made the occurrences before it already, and made again under a new jitter_seconds, at other
-- times, they would be made twice.
INSERT INTO jobs (tenant_id, name, target, schedule, timezone, payload, max_attempts, backoff_seconds,
                  timeout_seconds, expire_after_seconds, misfire, paused, paused_reason, next_fire_at,
                  priority, callback, concurrency, rate_limit, overlap, jitter_seconds, pause_after_failures,
                  "unique", debounce, tags, on_events)
VALUES (:tenant_id, :name, :target, :schedule, :timezone, COALESCE(CAST(:payload AS jsonb), 'null'::jsonb),
        :max_attempts, :backoff_seconds, :timeout_seconds, :expire_after_seconds, :misfire, :paused,
        CASE WHEN CAST(:paused AS boolean) THEN 'requested' END, :next_fire_at, :priority, :callback,
        :concurrency, :rate_limit, :overlap, :jitter_seconds, :pause_after_failures, :unique, :debounce,
        NULLIF(CAST(:tags AS text[]), '{}'), NULLIF(CAST(:on_events AS text[]), '{}'))
ON CONFLICT (tenant_id, name) DO UPDATE SET
    target = EXCLUDED.target, schedule = EXCLUDED.schedule, timezone = EXCLUDED.timezone,
    payload = EXCLUDED.payload, max_attempts = EXCLUDED.max_attempts,
    backoff_seconds = EXCLUDED.backoff_seconds, timeout_seconds = EXCLUDED.timeout_seconds,
    expire_after_seconds = EXCLUDED.expire_after_seconds,
    misfire = EXCLUDED.misfire, paused = EXCLUDED.paused,
    next_fire_at = CASE WHEN jobs.schedule = EXCLUDED.schedule AND jobs.timezone = EXCLUDED.timezone
                             AND NOT jobs.paused AND NOT EXCLUDED.paused
                        THEN GREATEST(jobs.next_fire_at, EXCLUDED.next_fire_at)
                        ELSE EXCLUDED.next_fire_at END,
    paused_reason = CASE WHEN NOT EXCLUDED.paused THEN NULL WHEN jobs.paused THEN jobs.paused_reason
                         ELSE 'requested' END,
    consecutive_failures = CASE WHEN (jobs.paused AND NOT EXCLUDED.paused) OR EXCLUDED.pause_after_failures IS NULL
                                THEN 0 ELSE jobs.consecutive_failures END,
    priority = EXCLUDED.priority, callback = EXCLUDED.callback, concurrency = EXCLUDED.concurrency,
    rate_limit = EXCLUDED.rate_limit, overlap = EXCLUDED.overlap, jitter_seconds = EXCLUDED.jitter_seconds,
    pause_after_failures = EXCLUDED.pause_after_failures, "unique" = EXCLUDED."unique",
    debounce = EXCLUDED.debounce, tags = EXCLUDED.tags, on_events = EXCLUDED.on_events, updated_at = now()
RETURNING *, scheduler_job_in_flight(tenant_id, name) AS in_flight, (xmax = 0) AS inserted;

-- name: wake_flow_keys
-- A job's limits were written: its rate-limited keys are looked at again on the keeper's next pass
-- (a raised or removed limit may give room before the time the old one said).
UPDATE concurrency_slots SET next_at = NULL
WHERE tenant_id = :tenant_id AND job = :name AND next_at IS NOT NULL;

-- name: lock_tenant_for_job_create
-- Serializes job creation within a tenant (a concurrent PUT waits here until this one commits), so
-- the count that follows, in its own statement and so its own snapshot, cannot be passed by a race.
SELECT id FROM tenants WHERE id = :tenant_id FOR NO KEY UPDATE;

-- name: count_jobs
-- The tenant's job count, and whether this name is one of them (a replace adds nothing).
SELECT count(*) AS jobs, bool_or(name = :name) IS TRUE AS present FROM jobs WHERE tenant_id = :tenant_id;

-- name: get_job
SELECT *, scheduler_job_in_flight(tenant_id, name) AS in_flight FROM jobs
WHERE tenant_id = :tenant_id AND name = :name;

-- name: list_jobs
-- Keyset by name: stable under concurrent upserts, no OFFSET scans.
SELECT *, scheduler_job_in_flight(tenant_id, name) AS in_flight FROM jobs
WHERE tenant_id = :tenant_id AND name > :after
ORDER BY name
LIMIT :limit;

-- name: delete_job
DELETE FROM jobs WHERE tenant_id = :tenant_id AND name = :name RETURNING name;

-- name: cancel_pending_runs_of_job
-- fires: job_runs_count_group_runs, job_runs_flow_control, job_runs_queue_changed, job_runs_record_callback, job_runs_settle_dependents
-- Deleting a job cancels what has not been handed out yet; dispatched runs are cancelled too, and a
-- worker that receives one acks and skips it (its start transition finds no 'dispatched' row).
UPDATE job_runs SET status = 'cancelled', finished_at = now(), lease_owner = NULL, lease_expires_at = NULL
WHERE tenant_id = :tenant_id AND job = :name AND status IN ('pending', 'dispatched');

-- ─────────────────── flow control: pause, concurrency, rate limits ───────────────────
-- A held run is pending with due_at 'infinity' (its own due time kept in held_due_at), and outside
-- the pending rows of run_queue the claim reads (its state is 3, migration 0017), so holding 100k
-- runs costs the claim nothing; what must count held runs reads job_runs_held.

-- name: set_job_paused
-- A paused job fires no cron occurrence either (lock_due_cron_jobs), so its next fire goes. A
-- resume starts the job's failure streak again from 0; a pause keeps its reason (a job paused after
-- failures stays so).
UPDATE jobs SET paused = :paused, next_fire_at = NULL, updated_at = now(),
    paused_reason = CASE WHEN NOT :paused THEN NULL WHEN paused THEN paused_reason ELSE 'requested' END,
    consecutive_failures = CASE WHEN :paused THEN consecutive_failures ELSE 0 END
WHERE tenant_id = :tenant_id AND name = :name
RETURNING schedule, timezone;

-- name: set_tenant_paused
UPDATE tenants SET paused = :paused WHERE id = :id RETURNING id;

-- name: hold_paused_runs
-- fires: job_runs_count_group_runs, job_runs_flow_control, job_runs_queue_changed
-- Pausing holds every pending run of the job (:name) or of the whole tenant (:name null), those
-- waiting for a concurrency slot or holding one included (the trigger frees the slot).
UPDATE job_runs
SET held = 'paused', held_due_at = CASE WHEN held IS NULL THEN due_at ELSE held_due_at END, due_at = 'infinity'
WHERE tenant_id = :tenant_id AND (CAST(:name AS text) IS NULL OR job = :name)
  AND status = 'pending' AND (held IS NULL OR held IN ('concurrency', 'rate_limit'));

-- name: paused_scopes
-- What is paused: (tenant, job), or (tenant, null) for a whole tenant. Tiny (partial indexes of
-- migration 0012), and empty on the default path, where the keeper then reads no run at all.
SELECT tenant_id, name FROM jobs WHERE paused
UNION ALL
SELECT id, NULL FROM tenants WHERE paused;

-- name: rehold_paused_runs
-- fires: job_runs_count_group_runs, job_runs_flow_control, job_runs_queue_changed
-- The keeper's catch-up for one paused scope: a run pending and unheld all the same (every statement
-- of the service holds it as it makes it pending, migration 0018; an operator's own UPDATE does not)
-- is held too. One scope per statement, the tenant given as a value, so the plan is
-- always a probe of run_queue_tenant_due, which holds only unheld runs: never a walk over the runs
-- already held (joined to the paused set instead, the planner hashed every pending run of every
-- tenant, each pass: 16k buffers per pass on a 20k drain). The runs are then found by id within
-- their days, as the claim finds them.
WITH q AS (SELECT id, scheduled_at FROM run_queue WHERE tenant_id = :tenant_id AND state = scheduler_queue_pending())
UPDATE job_runs SET held = 'paused', held_due_at = due_at, due_at = 'infinity'
WHERE id = ANY(ARRAY(SELECT id FROM q)) AND scheduled_at = ANY(ARRAY(SELECT scheduled_at FROM q))
  AND scheduled_at >= (SELECT min(scheduled_at) FROM q) AND scheduled_at <= (SELECT max(scheduled_at) FROM q)
  AND tenant_id = :tenant_id AND (CAST(:name AS text) IS NULL OR job = :name)
  AND status = 'pending' AND held IS NULL
RETURNING id;

-- name: release_paused_runs
-- fires: job_runs_count_group_runs, job_runs_flow_control, job_runs_queue_changed
-- Resume: each held run becomes due when it would have been, so those already due are claimed at
-- once, oldest first; a run of a limited job waits for a slot, or its window's room, instead. Not
-- while the other of its job and tenant is still paused.
UPDATE job_runs r
SET held = CASE WHEN r.concurrency_key IS NOT NULL THEN scheduler_flow_hold_reason(j.rate_limit) END,
    due_at = CASE WHEN r.concurrency_key IS NOT NULL THEN 'infinity' ELSE r.held_due_at END,
    held_due_at = CASE WHEN r.concurrency_key IS NOT NULL THEN r.held_due_at END
FROM jobs j JOIN tenants t ON t.id = j.tenant_id
WHERE r.held = 'paused' AND r.tenant_id = :tenant_id AND (CAST(:name AS text) IS NULL OR r.job = :name)
  AND r.status = 'pending' AND j.tenant_id = r.tenant_id AND j.name = r.job AND NOT j.paused AND NOT t.paused
RETURNING r.id, r.scheduled_at, r.due_at;

-- name: waiting_keys
-- Keys with runs waiting for a slot (:held 'concurrency') or for their window's room ('rate_limit'),
-- after the cursor (tenant, job, key): a loose index scan of job_runs_held, one probe per key, so
-- its cost follows the keys, not the runs they hold back.
WITH RECURSIVE keys AS (
    (SELECT tenant_id, job, concurrency_key FROM job_runs
     WHERE held = :held AND (tenant_id, job, concurrency_key) > (:tenant_id, :job, :key)
     ORDER BY tenant_id, job, concurrency_key LIMIT 1)
    UNION ALL
    SELECT n.tenant_id, n.job, n.concurrency_key FROM keys k
    CROSS JOIN LATERAL (
        SELECT r.tenant_id, r.job, r.concurrency_key FROM job_runs r
        WHERE r.held = :held AND (r.tenant_id, r.job, r.concurrency_key) > (k.tenant_id, k.job, k.concurrency_key)
        ORDER BY r.tenant_id, r.job, r.concurrency_key LIMIT 1
    ) AS n
)
SELECT tenant_id, job, concurrency_key AS key FROM keys LIMIT :limit;

-- name: ensure_concurrency_slots
-- The keys' rows, and the tenant slot's row (tenant_id, '', '') of each of their tenants that has a
-- max_in_flight (migration 0014).
INSERT INTO concurrency_slots (tenant_id, job, key)
SELECT * FROM scheduler_slot_keys(:tenant_ids, :jobs, :keys)
UNION
SELECT t.id, '', '' FROM tenants t WHERE t.id = ANY(CAST(:tenant_ids AS text[])) AND t.max_in_flight IS NOT NULL
ON CONFLICT DO NOTHING;

-- name: lock_concurrency_slots
-- One granter per key at a time, across engines: a key another engine is granting is skipped, and
-- so is a rate-limited key whose window has no room before next_at (never set for a concurrency key),
-- and so is every key of a limited tenant whose slot row another engine (or a PATCH) holds: the
-- caller grants those nothing (:locked_tenants of the grants). SKIP LOCKED never waits, so the
-- keeper cannot deadlock; the rows are still taken in one order (a tenant's slot row first).
SELECT s.tenant_id, s.job, s.key FROM concurrency_slots s
WHERE ((s.tenant_id, s.job, s.key) IN (
          SELECT * FROM scheduler_slot_keys(:tenant_ids, :jobs, :keys))
       AND (s.next_at IS NULL OR s.next_at <= now()))
   OR (s.job = '' AND s.key = '' AND s.tenant_id IN (
          SELECT t.id FROM tenants t WHERE t.id = ANY(CAST(:tenant_ids AS text[])) AND t.max_in_flight IS NOT NULL))
ORDER BY s.tenant_id, s.job, s.key
FOR UPDATE OF s SKIP LOCKED;

-- name: grant_concurrency_slots
-- fires: job_runs_count_group_runs, job_runs_flow_control, job_runs_queue_changed
-- Under the keys' locks (lock_concurrency_slots, earlier in the transaction, so this statement's
-- snapshot sees every slot granted or freed before): a run becomes due only with every slot that
-- applies, its key's and its tenant's, both taken here. Each key offers up to `limit - holders` of
-- its oldest waiting runs (all when its job has no limit: LIMIT NULL), at most the tenant's room;
-- of those, each limited tenant takes its room's worth, oldest first across its keys. Nothing
-- while the job or tenant is paused, nor for a limited tenant whose slot row this transaction
-- does not hold (:locked_tenants).
WITH room AS (
    SELECT k.tenant_id, k.job, k.key,
           CASE WHEN j.paused OR t.paused THEN 0
                WHEN j.concurrency IS NULL THEN NULL
                ELSE greatest(0, CAST(j.concurrency->>'limit' AS int) - (
                    SELECT count(*) FROM concurrency_holders h
                    WHERE h.tenant_id = k.tenant_id AND h.job = k.job AND h.key = k.key)) END AS free,
           scheduler_tenant_room(t.id, t.max_in_flight, CAST(:locked_tenants AS text[])) AS tenant_free
    FROM scheduler_slot_keys(:tenant_ids, :jobs, :keys) AS k
    JOIN jobs j ON j.tenant_id = k.tenant_id AND j.name = k.job
    JOIN tenants t ON t.id = k.tenant_id
),
offered AS (
    SELECT c.id, c.scheduled_at, room.tenant_id, room.tenant_free,
           row_number() OVER (PARTITION BY room.tenant_id ORDER BY c.held_due_at, c.id) AS place
    FROM room
    CROSS JOIN LATERAL (
        SELECT r.id, r.scheduled_at, r.held_due_at FROM job_runs r
        WHERE r.held = 'concurrency' AND r.tenant_id = room.tenant_id AND r.job = room.job
          AND r.concurrency_key = room.key AND r.held_due_at <= now()
        ORDER BY r.held_due_at
        LIMIT least(room.free, room.tenant_free)  -- least() skips NULLs: NULL only when neither limits
        FOR UPDATE SKIP LOCKED
    ) AS c
),
chosen AS (
    SELECT id, scheduled_at, tenant_free IS NOT NULL AS tenant_limited FROM offered
    WHERE tenant_free IS NULL OR place <= tenant_free
),
granted AS (
    UPDATE job_runs r SET held = NULL, due_at = r.held_due_at, held_due_at = NULL
    FROM chosen c
    WHERE r.id = c.id AND r.scheduled_at = c.scheduled_at AND r.held = 'concurrency' AND r.status = 'pending'
    RETURNING r.id, r.scheduled_at, r.due_at, r.tenant_id, r.job, r.concurrency_key, c.tenant_limited
),
holders AS (
    INSERT INTO concurrency_holders (run_id, tenant_id, job, key)
    SELECT id, tenant_id, job, concurrency_key FROM granted
    UNION ALL
    SELECT id, tenant_id, '', '' FROM granted WHERE tenant_limited
)
SELECT id, scheduled_at, due_at FROM granted;

-- name: grant_rate_limited_runs
-- fires: job_runs_count_group_runs, job_runs_flow_control, job_runs_queue_changed
-- Under the keys' locks, as grant_concurrency_slots: each key gets up to `limit - counted` of its
-- oldest waiting runs, which become due at once. Counted (migration 0013): the key's runs granted
-- and not started yet (each may start at any moment) and those started within the last period, so
-- no window of the period ever holds more than `limit` starts. Each grant is a row of the window.
-- A key left without room sleeps until the earliest time it can have some (next_at): the oldest
-- counted start + the period, or now + the period while every counted run is still to start (a
-- lower bound: those start later). Rows that left the window go. None while the job or tenant is
-- paused; all when the job's limit was removed (LIMIT NULL), counted nowhere. The period is
-- stretched by :margin_seconds (SCHEDULER_RATE_LIMIT_MARGIN_SECONDS): a start is the database's
-- time of the fenced start, and the worker's request reaches the limited API a little later, by as
-- much as a busy worker's event loop delays it. Within the tenant's max_in_flight, as
-- grant_concurrency_slots: a run granted takes its tenant's slot too, oldest first across its keys.
WITH room AS (
    SELECT k.tenant_id, k.job, k.key, p.period, j.paused OR t.paused AS paused,
           CASE WHEN j.paused OR t.paused THEN 0
                WHEN j.rate_limit IS NULL THEN NULL
                ELSE greatest(0, CAST(j.rate_limit->>'limit' AS int) - w.counted) END AS free,
           scheduler_tenant_room(t.id, t.max_in_flight, CAST(:locked_tenants AS text[])) AS tenant_free,
           w.oldest_start
    FROM scheduler_slot_keys(:tenant_ids, :jobs, :keys) AS k
    JOIN jobs j ON j.tenant_id = k.tenant_id AND j.name = k.job
    JOIN tenants t ON t.id = k.tenant_id
    CROSS JOIN LATERAL (
        SELECT make_interval(secs => CAST(j.rate_limit->>'period_seconds' AS float8) + :margin_seconds) AS period
    ) AS p
    CROSS JOIN LATERAL (
        SELECT count(*) AS counted, min(s.started_at) AS oldest_start FROM rate_limit_starts s
        WHERE s.tenant_id = k.tenant_id AND s.job = k.job AND s.key = k.key
          AND (s.started_at IS NULL OR s.started_at > now() - p.period)) AS w
),
offered AS (
    SELECT c.id, c.scheduled_at, room.tenant_free,
           row_number() OVER (PARTITION BY room.tenant_id ORDER BY c.held_due_at, c.id) AS place
    FROM room
    CROSS JOIN LATERAL (
        SELECT r.id, r.scheduled_at, r.held_due_at FROM job_runs r
        WHERE r.held = 'rate_limit' AND r.tenant_id = room.tenant_id AND r.job = room.job
          AND r.concurrency_key = room.key AND r.held_due_at <= now()
        ORDER BY r.held_due_at
        LIMIT least(room.free, room.tenant_free)  -- least() skips NULLs: NULL only when neither limits
        FOR UPDATE SKIP LOCKED
    ) AS c
),
chosen AS (
    SELECT id, scheduled_at, tenant_free IS NOT NULL AS tenant_limited FROM offered
    WHERE tenant_free IS NULL OR place <= tenant_free
),
granted AS (
    UPDATE job_runs r SET held = NULL, due_at = r.held_due_at, held_due_at = NULL
    FROM chosen c
    WHERE r.id = c.id AND r.scheduled_at = c.scheduled_at AND r.held = 'rate_limit' AND r.status = 'pending'
    RETURNING r.id, r.scheduled_at, r.due_at, r.tenant_id, r.job, r.concurrency_key, c.tenant_limited
),
tenant_holders AS (
    INSERT INTO concurrency_holders (run_id, tenant_id, job, key)
    SELECT id, tenant_id, '', '' FROM granted WHERE tenant_limited
),
counted AS (
    INSERT INTO rate_limit_starts (run_id, tenant_id, job, key, granted_at)
    SELECT g.id, g.tenant_id, g.job, g.concurrency_key, now() FROM granted g
    JOIN room ON room.tenant_id = g.tenant_id AND room.job = g.job AND room.key = g.concurrency_key
    WHERE room.free IS NOT NULL
),
expired AS (
    DELETE FROM rate_limit_starts s USING room
    WHERE s.tenant_id = room.tenant_id AND s.job = room.job AND s.key = room.key
      AND s.started_at <= now() - COALESCE(room.period, interval '0')
),
paced AS (
    UPDATE concurrency_slots sl
    SET next_at = CASE WHEN NOT room.paused AND room.free = (
                      SELECT count(*) FROM granted g WHERE g.tenant_id = room.tenant_id AND g.job = room.job
                        AND g.concurrency_key = room.key)
                  THEN COALESCE(room.oldest_start, now()) + room.period END
    FROM room
    WHERE sl.tenant_id = room.tenant_id AND sl.job = room.job AND sl.key = room.key
)
SELECT id, scheduled_at, due_at FROM granted;

-- name: sweep_rate_limit_starts
-- Window rows that left their window: started more than the job's period (+ :margin_seconds) ago,
-- or of a job that has no rate limit any more (counted nowhere). A grant deletes its key's expired
-- rows as it grants; these are the rows of keys nothing is granted to any more, which a tenant with
-- a key per customer would otherwise leave behind forever. A row not started yet counts as starting
-- now: it stays. At most :limit per call.
WITH gone AS (
    SELECT s.run_id, s.granted_at FROM rate_limit_starts s
    LEFT JOIN jobs j ON j.tenant_id = s.tenant_id AND j.name = s.job
    WHERE s.started_at IS NOT NULL
      AND (j.rate_limit IS NULL OR s.started_at <= now() - make_interval(
               secs => CAST(j.rate_limit->>'period_seconds' AS float8) + :margin_seconds))
    LIMIT :limit
)
DELETE FROM rate_limit_starts s USING gone
WHERE s.run_id = gone.run_id AND s.granted_at = gone.granted_at
RETURNING s.run_id;

-- name: sweep_concurrency_slots
-- The lock rows of keys that no run holds, waits for or counts in a window any more, among the next
-- :limit rows after the cursor (so every row is looked at in turn, however many are in use). A row
-- is only the lock its key's grants serialize on (and a rate-limited key's next_at): the keeper makes
-- it again (ensure_concurrency_slots) the moment a run waits for its key. A row another engine is
-- granting under is skipped, and a row is locked before it goes, so no grant loses the row it holds.
-- Tenant slot rows (job '') stay: there is one per limited tenant. Returns how many went and the
-- last row looked at (no row: the end was reached).
WITH examined AS (
    SELECT tenant_id, job, key FROM concurrency_slots
    WHERE (tenant_id, job, key) > (:tenant_id, :job, :key)
    ORDER BY tenant_id, job, key
    LIMIT :limit
),
idle AS (
    SELECT s.tenant_id, s.job, s.key FROM concurrency_slots s
    JOIN examined e ON e.tenant_id = s.tenant_id AND e.job = s.job AND e.key = s.key
    WHERE s.job <> ''
      AND NOT EXISTS (SELECT 1 FROM concurrency_holders h
                      WHERE h.tenant_id = s.tenant_id AND h.job = s.job AND h.key = s.key)
      AND NOT EXISTS (SELECT 1 FROM rate_limit_starts w
                      WHERE w.tenant_id = s.tenant_id AND w.job = s.job AND w.key = s.key)
      AND NOT EXISTS (SELECT 1 FROM job_runs r
                      WHERE r.held IN ('concurrency', 'rate_limit') AND r.tenant_id = s.tenant_id
                        AND r.job = s.job AND r.concurrency_key = s.key)
    FOR UPDATE OF s SKIP LOCKED
),
swept AS (
    DELETE FROM concurrency_slots s USING idle i
    WHERE s.tenant_id = i.tenant_id AND s.job = i.job AND s.key = i.key
    RETURNING 1
)
SELECT (SELECT count(*) FROM swept) AS swept, e.tenant_id, e.job, e.key
FROM examined e
ORDER BY e.tenant_id DESC, e.job DESC, e.key DESC
LIMIT 1;

-- name: ensure_tenant_slot
INSERT INTO concurrency_slots (tenant_id, job, key) VALUES (:tenant_id, '', '') ON CONFLICT DO NOTHING;

-- name: lock_tenant_flow
-- A change of the tenant's pause or max_in_flight, or of a job's pause, takes the tenant's flow lock
-- for its transaction (migration 0016), after its row locks: it waits for the statements in flight
-- that make the tenant's runs pending, and those that come meanwhile wait for it, then read what it
-- wrote.
SELECT pg_advisory_xact_lock(scheduler_tenant_flow_key(:tenant_id));

-- name: lock_tenant_slot
-- A PATCH of max_in_flight takes the tenant's slot row as the keeper does (waiting, where the
-- keeper skips), so no grant of the tenant's runs reads the limit while it changes.
SELECT 1 FROM concurrency_slots WHERE tenant_id = :tenant_id AND job = '' AND key = '' FOR UPDATE;

-- name: set_tenant_max_in_flight
-- The previous value too: only a tenant that was not limited has runs to bring under the limit.
-- (Concurrent PATCHes of one tenant are serialized by lock_tenant_slot, before this.)
UPDATE tenants t SET max_in_flight = :max_in_flight
FROM tenants before
WHERE t.id = :id AND before.id = t.id
RETURNING t.id, before.max_in_flight AS previous;

-- name: subject_runs_to_tenant_limit
-- fires: job_runs_count_group_runs, job_runs_flow_control, job_runs_queue_changed
-- A tenant becomes limited: in one statement, each of its pending runs not already waiting is
-- held for a slot (one due or granted gives its job slot back: the trigger frees it), and each
-- dispatched or running run takes the tenant's slot it holds until its attempt ends. Every live
-- run gets a concurrency key ('' when its job has none), so the trigger of 0010 frees the slot.
-- A row a claim or finish changes meanwhile is re-read once that commits (READ COMMITTED), so it
-- is handled by the status it ends up with.
WITH subject AS (
    UPDATE job_runs r
    SET concurrency_key = COALESCE(r.concurrency_key, ''),
        held = CASE WHEN r.status = 'pending' AND r.held IS NULL THEN 'concurrency' ELSE r.held END,
        held_due_at = CASE WHEN r.status = 'pending' AND r.held IS NULL THEN r.due_at ELSE r.held_due_at END,
        due_at = CASE WHEN r.status = 'pending' AND r.held IS NULL THEN 'infinity' ELSE r.due_at END
    WHERE r.tenant_id = :tenant_id AND r.status IN ('pending', 'dispatched', 'running')
      AND (r.concurrency_key IS NULL OR r.held IS NULL)
    RETURNING r.id, r.tenant_id, r.status
)
INSERT INTO concurrency_holders (run_id, tenant_id, job, key)
SELECT id, tenant_id, '', '' FROM subject WHERE status IN ('dispatched', 'running')
ON CONFLICT DO NOTHING;

-- name: forget_tenant_slot
-- The limit is removed: the tenant's slot is no longer counted; its waiting runs are granted by
-- the keeper in their order (a job with a limit of its own still waits for its key's slot).
DELETE FROM concurrency_holders WHERE tenant_id = :tenant_id AND job = '' AND key = '';

-- name: get_tenant
SELECT id, created_at, paused, max_in_flight,
       CASE WHEN max_in_flight IS NOT NULL THEN scheduler_tenant_in_flight(id) END AS in_flight
FROM tenants WHERE id = :id;

-- name: count_held_runs
-- Held runs per reason, each counted up to :limit (the gauge's and the Overview's cost stays
-- bounded): every tenant's (:tenant_id null, the reaper's gauge) or one tenant's (the dashboard).
-- job_runs_held leads with (held, tenant_id): either way an index range.
SELECT reason, (SELECT count(*) FROM (
                    SELECT 1 FROM job_runs
                    WHERE held = reason AND (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id)
                    LIMIT :limit) AS h) AS runs
FROM unnest(CAST(ARRAY['paused', 'concurrency', 'rate_limit', 'dependencies'] AS text[])) AS reason;

-- name: db_now
SELECT now();

-- ─────────────────────────────────── runs ───────────────────────────────────

-- name: insert_runs
-- fires: job_runs_queue_added, job_runs_record_tags
-- One statement for one run or a batch of 1000: the ids are minted first (their leading 48 bits are
-- scheduled_at, so the id names the partition), the job's settings are snapshot onto each run (its
-- priority unless the run brings its own), and the input's ordinal comes back so the caller can answer
-- in request order. All or nothing: if one
-- run names an unknown job, or brings tags that with its job's make more than :max_tags, no run is
-- inserted (the caller sees fewer rows than it sent and finds which with claim_dedupe_keys and
-- job_tags), so even a batch sent without a transaction never half-writes. Payloads and metadata
-- arrive as JSON text, not jsonb[]: an array parameter would read a payload that is itself a JSON
-- array as one more dimension of the parameter; for the same reason a run's tags arrive joined by
-- commas (no tag has one).
-- A run of a job with a `unique` or `debounce` rule (migration 0021) is inserted only with the key
-- and the id that claim_dedupe_keys claimed for it, earlier in the caller's transaction: without
-- them, nothing is inserted either, and the caller claims the keys first. :run_ids, :dedupe_keys,
-- :tags and :metadatas are null when no run has them (unnest then pads them with nulls).
WITH input AS (
    SELECT i.ord,
           COALESCE(i.scheduled_at, now()) AS scheduled_at,
           i.job, CAST(i.payload AS jsonb) AS payload, i.idempotency_key, i.priority,
           CAST(i.callback AS jsonb) AS callback, i.expires_at, i.claimed_id, i.dedupe_key,
           string_to_array(i.tags, ',') AS tags, CAST(i.metadata AS jsonb) AS metadata
    FROM unnest(CAST(:jobs AS text[]), CAST(:scheduled_ats AS timestamptz[]), CAST(:payloads AS text[]),
                CAST(:idempotency_keys AS text[]), CAST(:priorities AS smallint[]),
                CAST(:callbacks AS text[]), CAST(:expires_ats AS timestamptz[]), CAST(:run_ids AS uuid[]),
                CAST(:dedupe_keys AS text[]), CAST(:tags AS text[]), CAST(:metadatas AS text[]))
         WITH ORDINALITY AS i(job, scheduled_at, payload, idempotency_key, priority, callback, expires_at,
                              claimed_id, dedupe_key, tags, metadata, ord)
),
minted AS (
    SELECT input.*, COALESCE(input.claimed_id, scheduler_run_id(input.scheduled_at)) AS id FROM input
),
tenant AS (
    -- The tenant's pause and max_in_flight and its paused jobs, read under its flow lock (migration
    -- 0016): a change of them that commits while this insert runs is waited for and read, one that
    -- comes later waits for this commit and then holds these runs itself. Read with the statement's
    -- snapshot, a run inserted in that instant escaped the new setting.
    SELECT paused, max_in_flight, paused_jobs FROM scheduler_tenant_flow(:tenant_id)
),
complete AS (
    -- Does every input name a job of this tenant, with the key it claimed if the job has a rule,
    -- and room for its own tags beside the job's?
    SELECT NOT EXISTS (
        SELECT 1 FROM input WHERE NOT EXISTS (
            SELECT 1 FROM jobs j WHERE j.tenant_id = :tenant_id AND j.name = input.job
              AND (input.dedupe_key IS NOT NULL OR (j."unique" IS NULL AND j.debounce IS NULL))
              AND (input.tags IS NULL OR cardinality(scheduler_run_tags(j.tags, input.tags)) <= :max_tags))
    ) AS yes
),
inserted AS (
    -- A run of a paused job or tenant, or of a concurrency- or rate-limited job, is held from the
    -- start (scheduler_run_hold, migrations 0010, 0013, 0014 and 0016): out of the claim's range
    -- until resumed, given a slot or given room in its key's window. Its deadline to start is its
    -- own or its job's expire_after_seconds after it is scheduled (none when the job has none). A
    -- debounced run is due its period after it was submitted for (its scheduled_at stays, as a
    -- retried run's does).
    INSERT INTO job_runs (id, scheduled_at, tenant_id, job, origin, payload, target, max_attempts,
                          backoff_seconds, timeout_seconds, due_at, idempotency_key, traceparent, priority, callback,
                          held, held_due_at, concurrency_key, expires_at, counts_failures, dedupe_key,
                          tags, metadata, group_id)
    SELECT m.id, m.scheduled_at, j.tenant_id, j.name, 'api', COALESCE(m.payload, j.payload), j.target,
           j.max_attempts, j.backoff_seconds, j.timeout_seconds, h.due_at, m.idempotency_key,
           :traceparent, COALESCE(m.priority, j.priority), COALESCE(m.callback, j.callback),
           h.held, h.held_due_at, h.concurrency_key,
           COALESCE(m.expires_at, m.scheduled_at + make_interval(secs => j.expire_after_seconds)),
           scheduler_counts_failures(j.pause_after_failures), m.dedupe_key,
           CASE WHEN m.tags IS NULL THEN j.tags ELSE scheduler_run_tags(j.tags, m.tags) END, m.metadata,
           CAST(:group_id AS uuid)
    FROM minted m
    JOIN jobs j ON j.tenant_id = :tenant_id AND j.name = m.job
    CROSS JOIN tenant t
    CROSS JOIN LATERAL scheduler_run_hold(t.paused, t.max_in_flight, j.name = ANY(t.paused_jobs),
                                          j.concurrency, j.rate_limit, COALESCE(m.payload, j.payload),
                                          CASE WHEN j.debounce IS NULL THEN m.scheduled_at
                                               ELSE m.scheduled_at + make_interval(
                                                   secs => CAST(j.debounce->>'period_seconds' AS float8)) END) AS h
    WHERE (SELECT yes FROM complete)
    RETURNING *
),
notified AS (
    -- Wakes idle engines when the transaction commits, for runs already due; the payload lowers
    -- their claim floor to the oldest of them. In this statement, so a plain submission is one
    -- round trip. `:notify` lets the caller skip it: NOTIFY serializes commits (see submission.py).
    SELECT pg_notify(:channel, CAST(min(scheduled_at) AS text)) FROM inserted
    WHERE scheduled_at <= now() AND :notify
    HAVING count(*) > 0
)
SELECT inserted.*, minted.ord FROM inserted JOIN minted USING (id)
WHERE (SELECT count(*) FROM notified) >= 0  -- evaluated once, so the NOTIFY is sent
ORDER BY minted.ord;

-- name: claim_dedupe_keys
-- The keys of the runs about to be submitted, for the jobs with a unique or debounce rule (migration
-- 0021), claimed in dedupe_keys (INSERT … ON CONFLICT: exact however many requests race) for the ids
-- minted here, which insert_runs then inserts in the same transaction. The first run of each key in the
-- request claims it, in key order, so two requests never wait for each other's keys in opposite
-- orders; the tenant's flow lock is taken first, as insert_runs takes it. A key another run holds is
-- taken over when its window is over, or when the caller found its holder ended (:released) under the
-- row lock that this ON CONFLICT took on it the first time (DO UPDATE locks the row even when its
-- WHERE is false, and then writes nothing). A row per input, in order: `job_exists`; for a job with a
-- rule, its key, and the id and scheduled_at to insert it with if `claimed`.
WITH input AS (
    SELECT i.ord, i.job, COALESCE(i.scheduled_at, now()) AS scheduled_at, CAST(i.payload AS jsonb) AS payload
    FROM unnest(CAST(:jobs AS text[]), CAST(:scheduled_ats AS timestamptz[]), CAST(:payloads AS text[]))
         WITH ORDINALITY AS i(job, scheduled_at, payload, ord)
),
keyed AS (
    SELECT i.ord, j.name AS job, i.scheduled_at,
           CASE WHEN j."unique" IS NOT NULL OR j.debounce IS NOT NULL THEN scheduler_run_id(i.scheduled_at) END AS id,
           scheduler_dedupe_key(COALESCE(j."unique", j.debounce), COALESCE(i.payload, j.payload)) AS key,
           now() + make_interval(secs => CAST(j."unique"->>'within_seconds' AS float8)) AS window_ends_at,
           i.scheduled_at + make_interval(secs => CAST(j.debounce->>'max_delay_seconds' AS float8)) AS latest_due_at
    FROM input i JOIN jobs j ON j.tenant_id = :tenant_id AND j.name = i.job
    WHERE EXISTS (SELECT FROM scheduler_tenant_flow(:tenant_id))
),
claimed AS (
    INSERT INTO dedupe_keys AS k (tenant_id, job, key, run_id, run_scheduled_at, window_ends_at, latest_due_at)
    SELECT DISTINCT ON (job, key) :tenant_id, job, key, id, scheduled_at, window_ends_at, latest_due_at
    FROM keyed WHERE key IS NOT NULL
    ORDER BY job, key, ord
    ON CONFLICT (tenant_id, job, key) DO UPDATE
    SET run_id = excluded.run_id, run_scheduled_at = excluded.run_scheduled_at,
        window_ends_at = excluded.window_ends_at, latest_due_at = excluded.latest_due_at
    WHERE k.window_ends_at <= now() OR k.run_id = ANY(CAST(:released AS uuid[]))
    RETURNING k.run_id
)
SELECT i.ord, keyed.job IS NOT NULL AS job_exists, keyed.key, keyed.id, keyed.scheduled_at,
       keyed.id IN (SELECT run_id FROM claimed) AS claimed
FROM input i LEFT JOIN keyed ON keyed.ord = i.ord
ORDER BY i.ord;

-- name: job_tags
-- The error path of insert_runs: the default tags of those of these jobs the tenant has (a name
-- missing here is a job it does not have).
SELECT name, tags FROM jobs WHERE tenant_id = :tenant_id AND name = ANY(CAST(:names AS text[]));

-- name: notify_runs_due
-- Wakes idle engines at commit; the payload lowers their claim floor to the oldest new run.
SELECT pg_notify(:channel, CAST(:floor AS text));

-- name: find_idempotency_keys
-- A key holds until maintenance deletes it (delete_expired_idempotency_keys), never by a clock here:
-- its run may be scheduled, or retried, long after the key was written.
SELECT key, run_id, body_hash FROM idempotency_keys
WHERE tenant_id = :tenant_id AND key = ANY(CAST(:keys AS text[]));

-- name: insert_idempotency_keys
-- A concurrent request with the same key, not yet committed, makes this insert wait on it; the
-- lock_timeout set per row (before its insert, so it bounds that wait) turns a wait longer than
-- :in_flight_wait into LockNotAvailable, which the caller answers 409. A key that comes back
-- missing was committed by the other request meanwhile: the caller retries and replays it.
-- expires_at is a floor: the grace after the submission or after scheduled_at, whichever is later.
INSERT INTO idempotency_keys (tenant_id, key, run_id, run_scheduled_at, body_hash, expires_at)
SELECT :tenant_id, k.key, k.run_id, k.run_scheduled_at, k.body_hash,
       greatest(now(), k.run_scheduled_at) + make_interval(secs => :grace_seconds)
FROM unnest(CAST(:keys AS text[]), CAST(:run_ids AS uuid[]), CAST(:run_scheduled_ats AS timestamptz[]),
            CAST(:body_hashes AS text[]))
     AS k(key, run_id, run_scheduled_at, body_hash)
WHERE set_config('lock_timeout', CAST(:in_flight_wait AS text), true) IS NOT NULL
ON CONFLICT (tenant_id, key) DO NOTHING
RETURNING key;

-- name: delete_expired_idempotency_keys
-- A key goes once its floor passed and its run has been terminal for the grace period, or once its
-- run is gone with its day partition: never while a retry could still be resubmitted as a duplicate.
DELETE FROM idempotency_keys
WHERE ctid = ANY (ARRAY(
    SELECT k.ctid FROM idempotency_keys k
    WHERE k.expires_at <= now()
      AND NOT EXISTS (
          SELECT 1 FROM job_runs r
          WHERE r.id = k.run_id AND r.scheduled_at = k.run_scheduled_at
            AND (r.finished_at IS NULL OR r.finished_at > now() - make_interval(secs => :grace_seconds)))
    LIMIT :limit));

-- name: dedupe_holders
-- The runs holding these keys (:jobs[i], :keys[i]) of the tenant, read by a submitter whose
-- claim_dedupe_keys found them taken: it holds their rows' locks (that ON CONFLICT took them), so
-- they cannot change before it commits. `debounced`: the rule the job has now.
SELECT k.job, k.key, k.run_id, k.run_scheduled_at, k.window_ends_at, j.debounce IS NOT NULL AS debounced
FROM dedupe_keys k
JOIN jobs j ON j.tenant_id = k.tenant_id AND j.name = k.job
WHERE k.tenant_id = :tenant_id
  AND (k.job, k.key) IN (SELECT * FROM unnest(CAST(:jobs AS text[]), CAST(:keys AS text[])));

-- name: jobs_with_dedupe_rules
-- Whether any of these jobs of the tenant has a unique or debounce rule: a submission refused for
-- the tenant's backlog quota may still be answered with runs that exist.
SELECT EXISTS (SELECT 1 FROM jobs WHERE tenant_id = :tenant_id AND name = ANY(CAST(:names AS text[]))
                                    AND ("unique" IS NOT NULL OR debounce IS NOT NULL));

-- name: debounce_runs
-- fires: job_runs_count_group_runs, job_runs_flow_control, job_runs_queue_changed
-- Later submissions of debounced keys fold into the runs holding them (:ids, one submission each):
-- each replaces its run's payload (null: the job's) and makes it due its period after the
-- submission's scheduled_at (default now), never past the key's latest_due_at. The caller holds
-- the keys' row locks, so one key's submissions fold one at a time. Only into a run still pending
-- that holds no slot: a claim that locked the run first made it the worker's (this then finds it
-- dispatched and matches nothing), and a run granted its concurrency slot or rate-limit room is due
-- and on its way; either way the caller makes a new run, the next window's. A held run stays held:
-- the flow trigger (migration 0010) keeps the new time in held_due_at. A run now due wakes the
-- engines, as reschedule_run does.
WITH folds AS (
    SELECT f.id, f.payload, f.scheduled_at, k.latest_due_at, j.payload AS job_payload,
           make_interval(secs => CAST(j.debounce->>'period_seconds' AS float8)) AS period
    FROM unnest(CAST(:ids AS uuid[]), CAST(:jobs AS text[]), CAST(:keys AS text[]), CAST(:payloads AS text[]),
                CAST(:scheduled_ats AS timestamptz[])) AS f(id, job, key, payload, scheduled_at)
    JOIN dedupe_keys k ON k.tenant_id = :tenant_id AND k.job = f.job AND k.key = f.key AND k.run_id = f.id
    JOIN jobs j ON j.tenant_id = :tenant_id AND j.name = f.job AND j.debounce IS NOT NULL
),
folded AS (
    UPDATE job_runs r
    SET payload = COALESCE(CAST(folds.payload AS jsonb), folds.job_payload),
        due_at = least(folds.latest_due_at, COALESCE(folds.scheduled_at, now()) + folds.period)
    FROM folds
    WHERE r.id = folds.id AND r.scheduled_at >= :lo AND r.scheduled_at < :hi AND r.tenant_id = :tenant_id
      AND r.status = 'pending' AND (r.concurrency_key IS NULL OR r.held IS NOT NULL)
    RETURNING r.*
),
notified AS (
    SELECT pg_notify(:channel, CAST(min(scheduled_at) AS text)) FROM folded WHERE due_at <= now()
    HAVING count(*) > 0
)
SELECT * FROM folded WHERE (SELECT count(*) FROM notified) >= 0;

-- name: sweep_dedupe_keys
-- The keys that hold nothing any more among the next :limit rows after the cursor (so every row is
-- looked at in turn): a window that is over, or, without a window, a run that ended or went with its
-- day. A row is locked before it goes and only as it was read: one a submitter holds is skipped, and
-- one a submitter took over since (another run, another window) no longer matches. Returns how many
-- went and the last row looked at (no row: the end was reached).
WITH examined AS (
    SELECT tenant_id, job, key, run_id, run_scheduled_at, window_ends_at FROM dedupe_keys
    WHERE (tenant_id, job, key) > (:tenant_id, :job, :key)
    ORDER BY tenant_id, job, key
    LIMIT :limit
),
free AS (
    SELECT k.tenant_id, k.job, k.key FROM dedupe_keys k
    JOIN examined e ON e.tenant_id = k.tenant_id AND e.job = k.job AND e.key = k.key
    WHERE k.run_id = e.run_id AND k.window_ends_at IS NOT DISTINCT FROM e.window_ends_at
      AND CASE WHEN e.window_ends_at IS NOT NULL THEN e.window_ends_at <= now()
               ELSE NOT EXISTS (SELECT 1 FROM job_runs r
                                WHERE r.id = e.run_id AND r.scheduled_at = e.run_scheduled_at
                                  AND r.status IN ('pending', 'dispatched', 'running')) END
    FOR UPDATE OF k SKIP LOCKED
),
swept AS (
    DELETE FROM dedupe_keys k USING free f
    WHERE k.tenant_id = f.tenant_id AND k.job = f.job AND k.key = f.key
    RETURNING 1
)
SELECT (SELECT count(*) FROM swept) AS swept, e.tenant_id, e.job, e.key
FROM examined e
ORDER BY e.tenant_id DESC, e.job DESC, e.key DESC
LIMIT 1;

-- name: count_pending_runs
-- Admission control counts at most quota + 1 rows: the answer is "over" or "not over", never a
-- full count of a large backlog.
-- Unheld pending runs are counted from run_queue_tenant_due; held runs count too, from the held
-- index, one descent per reason.
SELECT LEAST(:limit, (SELECT count(*) FROM (
            SELECT 1 FROM run_queue WHERE tenant_id = :tenant_id AND state = scheduler_queue_pending()
            LIMIT :limit) AS p)
     + (SELECT count(*) FROM (
            SELECT 1 FROM job_runs
            WHERE held = ANY(CAST(:held_reasons AS text[])) AND tenant_id = :tenant_id AND status = 'pending'
            LIMIT :limit) AS h));

-- name: get_run
-- The id's leading 48 bits are scheduled_at in ms, so [lo, hi) is one millisecond: one partition.
-- A run of another tenant is not found: :tenant_id NULL (the admin) sees every tenant's.
-- held_until: a run waiting for its key's rate limit is not due before the key's window has room.
SELECT r.*, (SELECT s.next_at FROM concurrency_slots s
             WHERE r.held = 'rate_limit' AND s.tenant_id = r.tenant_id AND s.job = r.job
               AND s.key = r.concurrency_key) AS held_until
FROM job_runs r
WHERE r.id = :id AND r.scheduled_at >= :lo AND r.scheduled_at < :hi
  AND (CAST(:tenant_id AS text) IS NULL OR r.tenant_id = :tenant_id);

-- name: get_runs
-- Several runs by id; the bounds let the planner prune to the days the ids name.
SELECT * FROM job_runs
WHERE id = ANY(CAST(:ids AS uuid[])) AND scheduled_at >= :lo AND scheduled_at < :hi;

-- name: list_runs
-- Newest first, keyset-paginated on (scheduled_at, id) so each page is an index range scan.
SELECT * FROM job_runs
WHERE tenant_id = :tenant_id
  AND (CAST(:status AS text) IS NULL OR status = :status)
  AND (CAST(:job AS text) IS NULL OR job = :job)
  AND (CAST(:scheduled_after AS timestamptz) IS NULL OR scheduled_at >= :scheduled_after)
  AND (CAST(:scheduled_before AS timestamptz) IS NULL OR scheduled_at < :scheduled_before)
  AND (CAST(:cursor_at AS timestamptz) IS NULL OR (scheduled_at, id) < (:cursor_at, :cursor_id))
ORDER BY scheduled_at DESC, id DESC
LIMIT :limit;

-- name: list_tagged_runs
-- list_runs of the runs carrying every tag of :tags, in the same order and pages, read from run_tags
-- (migration 0022): one tag's entries from the cursor on, its key (tenant_id, tag, scheduled_at,
-- run_id) read backwards day by day, each joined to its run by the run's key; the run must carry the
-- other tags and pass the other filters; the tag that leads is scheduler_lead_tag's (migration 0022),
-- so a rare tag bounds the read even beside a common one. OFFSET 0 keeps the join a loop that stops
-- with the page: planned as a whole, it was a hash join over every run of the tag (1.8 s for a page
-- of a tag on 600k runs, 1.4 ms as a loop).
SELECT r.* FROM run_tags t
CROSS JOIN LATERAL (
    SELECT * FROM job_runs r
    WHERE r.id = t.run_id AND r.scheduled_at = t.scheduled_at AND r.tenant_id = :tenant_id
      AND r.tags @> CAST(:tags AS text[])
      AND (CAST(:status AS text) IS NULL OR r.status = :status)
      AND (CAST(:job AS text) IS NULL OR r.job = :job)
    OFFSET 0) AS r
WHERE t.tenant_id = :tenant_id AND t.tag = (SELECT scheduler_lead_tag(:tenant_id, CAST(:tags AS text[])))
  AND (CAST(:scheduled_after AS timestamptz) IS NULL OR t.scheduled_at >= :scheduled_after)
  AND (CAST(:scheduled_before AS timestamptz) IS NULL OR t.scheduled_at < :scheduled_before)
  AND (CAST(:cursor_at AS timestamptz) IS NULL OR (t.scheduled_at, t.run_id) < (:cursor_at, :cursor_id))
  AND (CAST(:cursor_at AS timestamptz) IS NULL OR t.scheduled_at <= :cursor_at)  -- prunes the days after it
ORDER BY t.scheduled_at DESC, t.run_id DESC
LIMIT :limit;

-- name: cancel_run
-- fires: job_runs_count_group_runs, job_runs_flow_control, job_runs_queue_changed, job_runs_record_callback, job_runs_settle_dependents
-- A run that has not ended is cancelled: pending, dispatched (its message is skipped on arrival: its
-- start finds no 'dispatched' row) or running. A running run's attempt is closed in its history as
-- `cancelled` by this statement, and its worker, told by the caller over NATS or by its next
-- heartbeat, stops it; its late outcome matches no 'running' row and changes nothing (a retry moves
-- the run to a new epoch besides). `was`: the status the run had, read under its row lock.
-- Scoped like get_run: another tenant's run is never touched.
WITH target AS (
    SELECT id, scheduled_at, status FROM job_runs
    WHERE id = :id AND scheduled_at >= :lo AND scheduled_at < :hi
      AND status IN ('pending', 'dispatched', 'running')
      AND (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id)
    FOR UPDATE
)
UPDATE job_runs r SET status = 'cancelled', finished_at = now(), lease_owner = NULL, lease_expires_at = NULL,
    attempts = CASE WHEN t.status <> 'running' THEN r.attempts
                    ELSE scheduler_append_attempt(r.attempts, r.max_attempts, r.attempt, r.epoch, r.lease_owner,
                                                  r.started_at, 'cancelled', NULL, NULL) END
FROM target t
WHERE r.id = t.id AND r.scheduled_at = t.scheduled_at AND r.scheduled_at >= :lo AND r.scheduled_at < :hi
RETURNING r.*, t.status AS was;

-- name: callback_delivery_states
-- The latest callback obligation of each run (a run retried and ended again owes another).
SELECT DISTINCT ON (run_id) run_id, status, attempts, last_error FROM run_callbacks
WHERE run_id = ANY(CAST(:run_ids AS uuid[]))
ORDER BY run_id, id DESC;

-- name: dashboard_status_counts
-- The dashboard's Overview covers runs scheduled in the last hour: that bound prunes to one or two
-- day partitions and the (tenant_id, scheduled_at) index. :tenant_id NULL (the admin): every tenant.
SELECT status, count(*) AS runs
FROM job_runs
WHERE scheduled_at >= now() - interval '1 hour' AND scheduled_at <= now()
  AND (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id)
GROUP BY status;

-- name: dashboard_timings
-- Over the same runs: due lag (claim time - due time, as scheduler_due_lag_seconds measures it) at
-- p50/p99, and finished runs per minute for the throughput chart (:minutes buckets, oldest first).
WITH recent AS (
    SELECT status, due_at, dispatched_at, finished_at
    FROM job_runs
    WHERE scheduled_at >= now() - interval '1 hour' AND scheduled_at <= now()
      AND (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id)
)
SELECT
    (SELECT percentile_cont(ARRAY[0.5, 0.99]) WITHIN GROUP (
         ORDER BY greatest(extract(epoch FROM dispatched_at - due_at), 0))
     FROM recent WHERE dispatched_at IS NOT NULL) AS due_lag,
    (SELECT array_agg(coalesce(f.finished, 0) ORDER BY m.minute)
     FROM generate_series(date_trunc('minute', now()) - make_interval(mins => :minutes - 1),
                          date_trunc('minute', now()), interval '1 minute') AS m (minute)
     LEFT JOIN (SELECT date_trunc('minute', finished_at) AS minute, count(*) AS finished
                FROM recent WHERE finished_at IS NOT NULL GROUP BY 1) AS f USING (minute)) AS per_minute;

-- name: dashboard_oldest_due_pending
-- The run waiting longest for an engine. run_queue_due (unheld pending runs) is keyed
-- (priority, due_at), so it is the oldest of one probe per priority (as due_backlog reads it).
SELECT o.id, r.tenant_id, r.job, o.due_at, now() - o.due_at AS waiting
FROM generate_series(0, 9) AS p(priority)
CROSS JOIN LATERAL (
    SELECT id, scheduled_at, due_at FROM run_queue
    WHERE state = scheduler_queue_pending() AND priority = p.priority AND due_at <= now()
      AND (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id)
    ORDER BY due_at
    LIMIT 1
) AS o
JOIN job_runs r ON r.id = o.id AND r.scheduled_at = o.scheduled_at
ORDER BY o.due_at
LIMIT 1;

-- name: dashboard_failure_groups
-- A tenant's failed runs of the last :days days, grouped by job and error, most frequent first,
-- with the newest run of each group to open.
SELECT job, last_error, count(*) AS runs, max(finished_at) AS latest,
       (array_agg(id ORDER BY finished_at DESC NULLS LAST))[1] AS newest_id
FROM job_runs
WHERE tenant_id = :tenant_id AND status = 'failed'
  AND scheduled_at >= now() - make_interval(days => :days)
GROUP BY job, last_error
ORDER BY runs DESC, latest DESC
LIMIT :limit;

-- name: run_lateness
-- Why a pending run is not running yet, from what the database knows (the Run page's "why is this
-- run late"): its own due time (a held run keeps it in held_due_at), its hold, its job's and
-- tenant's pause, its key's slots taken and limit (or its rate limit, the starts in its window and
-- when the window next has room), its tenant's max_in_flight and slots taken, the runs of its key
-- waiting before it, and the
-- tenant's due runs the claim takes before it (higher priority, or the same and due earlier). The
-- counts stop at :limit. Scoped like get_run: another tenant's run is not found.
WITH r AS (
    SELECT id, tenant_id, job, priority, held, concurrency_key, COALESCE(held_due_at, due_at) AS due
    FROM job_runs
    WHERE id = :id AND scheduled_at >= :lo AND scheduled_at < :hi AND status = 'pending'
      AND (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id)
)
SELECT r.held, r.due, r.tenant_id, extract(epoch FROM now() - r.due) AS late_seconds,
       j.paused AS job_paused, t.paused AS tenant_paused,
       t.max_in_flight, CASE WHEN t.max_in_flight IS NOT NULL THEN scheduler_tenant_in_flight(t.id) END
           AS tenant_in_flight,
       CAST(j.concurrency->>'limit' AS int) AS concurrency_limit, r.concurrency_key,
       (SELECT count(*) FROM concurrency_holders h
        WHERE h.tenant_id = r.tenant_id AND h.job = r.job AND h.key = r.concurrency_key) AS key_in_flight,
       CAST(j.rate_limit->>'limit' AS int) AS rate_limit, CAST(j.rate_limit->>'period_seconds' AS float8) AS rate_period,
       (SELECT count(*) FROM rate_limit_starts s
        WHERE s.tenant_id = r.tenant_id AND s.job = r.job AND s.key = r.concurrency_key
          AND (s.started_at IS NULL
               OR s.started_at > now() - make_interval(secs => CAST(j.rate_limit->>'period_seconds' AS float8)))
       ) AS key_in_window,
       (SELECT s.next_at FROM concurrency_slots s
        WHERE s.tenant_id = r.tenant_id AND s.job = r.job AND s.key = r.concurrency_key) AS key_next_at,
       (SELECT count(*) FROM (
            SELECT 1 FROM job_runs o
            WHERE o.held = r.held AND o.tenant_id = r.tenant_id AND o.job = r.job
              AND o.concurrency_key = r.concurrency_key AND o.held_due_at < r.due
            LIMIT :limit) AS w) AS key_waiting_before,
       (SELECT count(*) FROM (
            SELECT 1 FROM run_queue o
            WHERE o.state = scheduler_queue_pending() AND o.tenant_id = r.tenant_id AND o.due_at <= now()
              AND o.id <> r.id
              AND (o.priority < r.priority OR (o.priority = r.priority AND o.due_at <= r.due))
            LIMIT :limit) AS a) AS due_before
FROM r
LEFT JOIN jobs j ON j.tenant_id = r.tenant_id AND j.name = r.job
JOIN tenants t ON t.id = r.tenant_id;

-- name: match_runs
-- One chunk of a bulk action: the keys and statuses of a tenant's runs matching the filter, in the
-- listing's order (newest scheduled first) from the cursor on. Keys only, no payloads: a chunk is
-- hundreds of runs. No lock is taken here; the transition that follows re-checks each status.
SELECT id, scheduled_at, status FROM job_runs
WHERE tenant_id = :tenant_id
  AND (CAST(:statuses AS text[]) IS NULL OR status = ANY(CAST(:statuses AS text[])))
  AND (CAST(:job AS text) IS NULL OR job = :job)
  AND (CAST(:ids AS uuid[]) IS NULL OR id = ANY(CAST(:ids AS uuid[])))
  AND (NOT CAST(:by_error AS boolean) OR last_error IS NOT DISTINCT FROM CAST(:error AS text))
  AND (CAST(:scheduled_after AS timestamptz) IS NULL OR scheduled_at >= :scheduled_after)
  AND (CAST(:scheduled_before AS timestamptz) IS NULL OR scheduled_at < :scheduled_before)
  AND (CAST(:cursor_at AS timestamptz) IS NULL OR (scheduled_at, id) < (:cursor_at, :cursor_id))
ORDER BY scheduled_at DESC, id DESC
LIMIT :limit;

-- name: match_tagged_runs
-- match_runs of the runs carrying every tag of :tags, read as list_tagged_runs reads them.
SELECT r.id, r.scheduled_at, r.status FROM run_tags t
CROSS JOIN LATERAL (
    SELECT r.id, r.scheduled_at, r.status FROM job_runs r
    WHERE r.id = t.run_id AND r.scheduled_at = t.scheduled_at AND r.tenant_id = :tenant_id
      AND r.tags @> CAST(:tags AS text[])
      AND (CAST(:statuses AS text[]) IS NULL OR r.status = ANY(CAST(:statuses AS text[])))
      AND (CAST(:job AS text) IS NULL OR r.job = :job)
      AND (CAST(:ids AS uuid[]) IS NULL OR r.id = ANY(CAST(:ids AS uuid[])))
      AND (NOT CAST(:by_error AS boolean) OR r.last_error IS NOT DISTINCT FROM CAST(:error AS text))
    OFFSET 0) AS r
WHERE t.tenant_id = :tenant_id AND t.tag = (SELECT scheduler_lead_tag(:tenant_id, CAST(:tags AS text[])))
  AND (CAST(:scheduled_after AS timestamptz) IS NULL OR t.scheduled_at >= :scheduled_after)
  AND (CAST(:scheduled_before AS timestamptz) IS NULL OR t.scheduled_at < :scheduled_before)
  AND (CAST(:cursor_at AS timestamptz) IS NULL OR (t.scheduled_at, t.run_id) < (:cursor_at, :cursor_id))
  AND (CAST(:cursor_at AS timestamptz) IS NULL OR t.scheduled_at <= :cursor_at)  -- prunes the days after it
ORDER BY t.scheduled_at DESC, t.run_id DESC
LIMIT :limit;

-- name: cancel_runs
-- fires: job_runs_count_group_runs, job_runs_flow_control, job_runs_queue_changed, job_runs_record_callback, job_runs_settle_dependents
-- A bulk cancel's chunk: like cancel_run (running runs included, their attempt closed as
-- `cancelled`), fenced on the status, scoped to the tenant. Rows the claim (or a worker's start,
-- heartbeat or finish) holds at this instant are skipped, not waited for: waiting in the opposite
-- order to the claim's could deadlock with it. The caller tries the skipped ones again.
-- [lo, hi) are the days the ids name (as in get_runs).
WITH locked AS (
    SELECT id, scheduled_at, status FROM job_runs
    WHERE id = ANY(CAST(:ids AS uuid[])) AND tenant_id = :tenant_id
      AND status IN ('pending', 'dispatched', 'running')
      AND scheduled_at >= :lo AND scheduled_at < :hi
    FOR UPDATE SKIP LOCKED
)
UPDATE job_runs r SET status = 'cancelled', finished_at = now(), lease_owner = NULL, lease_expires_at = NULL,
    attempts = CASE WHEN l.status <> 'running' THEN r.attempts
                    ELSE scheduler_append_attempt(r.attempts, r.max_attempts, r.attempt, r.epoch, r.lease_owner,
                                                  r.started_at, 'cancelled', NULL, NULL) END
FROM locked l
WHERE r.id = l.id AND r.scheduled_at = l.scheduled_at AND r.scheduled_at >= :lo AND r.scheduled_at < :hi
RETURNING r.id, r.epoch, l.status AS was;

-- name: retry_runs
-- fires: job_runs_count_group_runs, job_runs_flow_control, job_runs_queue_changed
-- failed | cancelled | expired -> pending, due now, under a new epoch: a worker still finishing an
-- old attempt holds the old epoch, so its outcome matches nothing and is discarded. One statement for
-- one run (POST /runs/{id}/retry) or a bulk chunk. max_attempts becomes :max_attempts (which must
-- exceed the attempts made), or else one more than made if none is left. last_error, started_at and
-- the attempt count stay as the run's history. No lock waits on anyone: the claim and
-- the workers never hold finished rows. Wakes the engines at commit; the payloads are the
-- oldest and newest scheduled_at retried, so a run due before its scheduled_at (see
-- run_queue_pulled_forward, migration 0017) raises their claim ceiling at once. [lo, hi) are the
-- days the ids name (as in get_runs). A run of a limited job or tenant waits for its slots again (the
-- trigger of 0010 holds a run with a concurrency key); one that ended before its tenant got a
-- max_in_flight has none yet, so it gets one and is held here (the trigger does not fire for it).
-- Each tenant's max_in_flight is read under its flow lock, as insert_runs reads it. A deadline to
-- start that has passed goes (an expired run's always has: retried, it would only expire again); one
-- still ahead stays.
WITH flow AS (
    SELECT d.tenant_id, f.max_in_flight
    FROM (SELECT DISTINCT tenant_id FROM job_runs
          WHERE id = ANY(CAST(:ids AS uuid[])) AND status IN ('failed', 'cancelled', 'expired')
            AND scheduled_at >= :lo AND scheduled_at < :hi
            AND (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id)) AS d
    CROSS JOIN LATERAL scheduler_tenant_flow(d.tenant_id) AS f
),
retried AS (
    UPDATE job_runs r SET status = 'pending', epoch = r.epoch + 1,
        due_at = CASE WHEN r.concurrency_key IS NULL AND t.max_in_flight IS NOT NULL THEN 'infinity' ELSE now() END,
        held = CASE WHEN r.concurrency_key IS NULL AND t.max_in_flight IS NOT NULL THEN 'concurrency' END,
        held_due_at = CASE WHEN r.concurrency_key IS NULL AND t.max_in_flight IS NOT NULL THEN now() END,
        concurrency_key = CASE WHEN t.max_in_flight IS NOT NULL THEN COALESCE(r.concurrency_key, '')
                               ELSE r.concurrency_key END,
        max_attempts = COALESCE(CAST(:max_attempts AS int), greatest(r.max_attempts, r.attempt + 1)),
        expires_at = CASE WHEN r.expires_at > now() THEN r.expires_at END,
        finished_at = NULL, dispatched_at = NULL, lease_owner = NULL, lease_expires_at = NULL
    FROM flow t
    WHERE t.tenant_id = r.tenant_id AND r.id = ANY(CAST(:ids AS uuid[]))
      AND r.status IN ('failed', 'cancelled', 'expired')
      AND r.scheduled_at >= :lo AND r.scheduled_at < :hi
      AND (CAST(:tenant_id AS text) IS NULL OR r.tenant_id = :tenant_id)
      AND (CAST(:max_attempts AS int) IS NULL OR :max_attempts > r.attempt)
      AND r.attempt < :attempts_cap
    RETURNING r.*
),
notified AS (
    SELECT pg_notify(:channel, CAST(b.at AS text))
    FROM (SELECT min(scheduled_at) AS at FROM retried UNION SELECT max(scheduled_at) FROM retried) AS b
    WHERE b.at IS NOT NULL
)
SELECT * FROM retried
WHERE (SELECT count(*) FROM notified) >= 0;  -- evaluated once, so the NOTIFY is sent

-- name: reschedule_run
-- fires: job_runs_count_group_runs, job_runs_flow_control, job_runs_queue_changed
-- A pending run's due_at moves, earlier (a past time means now) or later; scheduled_at, its id and
-- its partition stay. Fenced on 'pending': once claimed it is the worker's, and this matches nothing.
-- A run now due before its scheduled_at is found by the claim through run_queue_pulled_forward; the
-- NOTIFY (only when due now) wakes the engines and, its payload being the run's scheduled_at,
-- raises their claim ceiling to it at once.
WITH moved AS (
    UPDATE job_runs SET due_at = greatest(:due_at, now())
    WHERE id = :id AND scheduled_at >= :lo AND scheduled_at < :hi AND status = 'pending'
      AND (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id)
    RETURNING *
),
notified AS (
    SELECT pg_notify(:channel, CAST(scheduled_at AS text)) FROM moved WHERE due_at <= now()
)
SELECT * FROM moved
WHERE (SELECT count(*) FROM notified) >= 0;

-- ──────────────────────────── claim and dispatch ────────────────────────────

-- name: claim_due_runs
-- fires: job_runs_count_group_runs, job_runs_flow_control, job_runs_queue_changed
-- The claim. It selects what the plain ranked form (stack/reference.py) selects, without ranking the
-- whole due set, whose cost grows with the backlog. Runs are found in run_queue, the narrow table of
-- live runs (migration 0017), and claimed in job_runs. Order: most urgent first (priority 0 before 9),
-- then oldest due_at. Fairness, work-conserving: each tenant's share (its `cap` first runs in that
-- order) comes first, and the room the shares leave in the batch goes to the first remaining due
-- runs, whoever's they are, so a lone tenant's burst fills whole batches.
-- Fast path: lock the first `batch_size` due runs; if no tenant has more than `cap` of them, they are
-- exactly the answer (a row's rank counts only earlier rows of its tenant, all inside this set).
-- Only when one tenant crowds the batch does the fair path run: one index probe per tenant with
-- pending work, each taking its first `cap` (its share); the rest of the batch is then filled from
-- the fast path's rows outside the shares (those are the first of everything outside the shares).
-- `:floor`..`:ceiling` (the oldest unfinished run, and the database clock plus a margin) let the
-- planner prune partitions on both sides, DEFAULT included, so a claim neither reads old days nor
-- holds locks that would block partition DDL. The ceiling is the only upper bound on scheduled_at
-- (due_at <= now() decides what is due): a run rescheduled or retried to a due_at before its
-- scheduled_at raises the ceiling to its scheduled_at (claim_floor reads them from
-- run_queue_pulled_forward), so it is claimed like any due run.
-- `:min_priority`..`:max_priority` (0..9: every run) split the claim between the engine's two loops:
-- urgent runs are claimed by a loop of their own in small batches (app/engine/dispatcher.py).
-- Payload and target come back as JSON text: the dispatcher decodes them run by run, so one value
-- it cannot decode fails that run alone instead of the fetch of the whole batch.
WITH RECURSIVE paused AS (
    -- What is paused (paused_scopes; empty on the default path: two empty partial-index reads). Every
    -- writer holds a paused run as it makes it pending (migration 0018), so this only guards the
    -- claim against a run made pending behind the service's back; the keeper then holds it.
    SELECT tenant_id, name FROM jobs WHERE paused
    UNION ALL
    SELECT id, NULL FROM tenants WHERE paused
),
oldest AS (
    -- The fast path: the first due runs by (priority, due_at), their queue rows locked; rows another
    -- engine holds are skipped. run_queue_due is keyed (priority, due_at), so this is an index walk
    -- that stops after `batch_size` rows.
    SELECT id, scheduled_at, tenant_id, priority, due_at FROM run_queue
    WHERE state = scheduler_queue_pending() AND due_at <= now()
      AND priority >= :min_priority AND priority <= :max_priority
      AND scheduled_at >= :floor AND scheduled_at <= :ceiling
    ORDER BY priority, due_at
    LIMIT :batch_size
    FOR UPDATE SKIP LOCKED
),
crowded AS (
    -- Does one tenant hold more than its cap of the fast path's batch?
    SELECT EXISTS (SELECT 1 FROM oldest GROUP BY tenant_id HAVING count(*) > :per_tenant_cap) AS yes
),
due_tenants AS (
    -- A loose index scan of run_queue_tenant_due: one probe per tenant with pending runs.
    (SELECT tenant_id FROM run_queue
     WHERE state = scheduler_queue_pending() AND scheduled_at >= :floor AND scheduled_at <= :ceiling
     ORDER BY tenant_id LIMIT 1)
    UNION ALL
    SELECT (SELECT r.tenant_id FROM run_queue r
            WHERE r.state = scheduler_queue_pending() AND r.scheduled_at >= :floor AND r.scheduled_at <= :ceiling
              AND r.tenant_id > d.tenant_id
            ORDER BY r.tenant_id LIMIT 1)
    FROM due_tenants d
    WHERE d.tenant_id IS NOT NULL
),
fair AS (
    -- The shares, evaluated only when crowded: each tenant's first `cap`, then the first overall.
    SELECT c.id, c.scheduled_at
    FROM due_tenants d
    CROSS JOIN LATERAL (
        SELECT r.id, r.scheduled_at, r.priority, r.due_at FROM run_queue r
        WHERE r.tenant_id = d.tenant_id AND r.state = scheduler_queue_pending() AND r.due_at <= now()
          AND r.priority >= :min_priority AND r.priority <= :max_priority
          AND r.scheduled_at >= :floor AND r.scheduled_at <= :ceiling
        ORDER BY r.priority, r.due_at
        LIMIT :per_tenant_cap
    ) AS c
    WHERE d.tenant_id IS NOT NULL AND (SELECT yes FROM crowded)
    ORDER BY c.priority, c.due_at
    LIMIT :batch_size
),
fair_locked AS (
    -- Locking is its own step (Postgres forbids FOR UPDATE beside LIMIT-per-group ranking), and the
    -- re-check of the state makes a row another engine took in the meantime simply not match.
    SELECT r.id, r.scheduled_at FROM run_queue r
    JOIN fair f ON r.id = f.id AND r.scheduled_at = f.scheduled_at
    WHERE r.state = scheduler_queue_pending() AND r.due_at <= now()
      AND r.priority >= :min_priority AND r.priority <= :max_priority
      AND r.scheduled_at >= :floor AND r.scheduled_at <= :ceiling
    FOR UPDATE OF r SKIP LOCKED
),
leftover AS (
    -- Work-conserving: the room the shares leave goes to the first due runs outside them. The fast
    -- path's rows are the first `batch_size` of all, so the first outside the shares are among them
    -- (already locked by this statement). Crowded batches only; an uncrowded one is `oldest` itself.
    SELECT o.id, o.scheduled_at FROM oldest o
    WHERE (SELECT yes FROM crowded)
      AND NOT EXISTS (SELECT 1 FROM fair_locked f WHERE f.id = o.id AND f.scheduled_at = o.scheduled_at)
    ORDER BY o.priority, o.due_at
    LIMIT GREATEST(:batch_size - (SELECT count(*) FROM fair_locked), 0)
),
chosen AS (
    SELECT id, scheduled_at FROM oldest WHERE NOT (SELECT yes FROM crowded)
    UNION ALL
    SELECT id, scheduled_at FROM fair_locked
    UNION ALL
    SELECT id, scheduled_at FROM leftover
),
runs AS (
    -- The runs themselves, by id within the chosen rows' days, locked without waiting: a writer that
    -- holds one (a cancel) waits in its trigger for this claim's queue row, so waiting for it here
    -- could deadlock; skipped, the run is simply not claimed this time. Their own row decides.
    SELECT r.id, r.scheduled_at FROM job_runs r
    WHERE r.id = ANY(ARRAY(SELECT id FROM chosen)) AND r.scheduled_at = ANY(ARRAY(SELECT scheduled_at FROM chosen))
      AND r.scheduled_at >= (SELECT min(scheduled_at) FROM chosen)
      AND r.scheduled_at <= (SELECT max(scheduled_at) FROM chosen)
      AND r.scheduled_at >= :floor AND r.scheduled_at <= :ceiling
      AND r.status = 'pending' AND r.held IS NULL AND r.due_at <= now()
      AND NOT EXISTS (SELECT 1 FROM paused p WHERE p.tenant_id = r.tenant_id AND (p.name IS NULL OR p.name = r.job))
    FOR UPDATE OF r SKIP LOCKED
)
UPDATE job_runs r
SET status = 'dispatched', epoch = r.epoch + 1, lease_owner = :owner,
    lease_expires_at = now() + make_interval(secs => :lease_seconds), dispatched_at = now()
-- The runs are found by their key (id, scheduled_at) within the days they span, not by a join:
-- joined, the planner hashed the whole partition to update one batch whenever the partition was
-- small next to its guess of the batch (a 20k backlog: 700 buffers and half the statement's time per
-- claim, for 500 rows). This form is one probe of the key per run in the rows' days whatever their
-- size, the other days pruned when the statement runs; with the id alone, Postgres 18 skip-scanned
-- the tenant listing index instead (3x the buffers beside 12k runs). The queue rows follow by
-- trigger (migration 0017).
WHERE r.id = ANY(ARRAY(SELECT id FROM runs)) AND r.scheduled_at = ANY(ARRAY(SELECT scheduled_at FROM runs))
  AND r.scheduled_at >= (SELECT min(scheduled_at) FROM runs)
  AND r.scheduled_at <= (SELECT max(scheduled_at) FROM runs)
  AND r.scheduled_at >= :floor AND r.scheduled_at <= :ceiling
RETURNING r.id, r.scheduled_at, r.tenant_id, r.job, r.payload::text AS payload_json,
          r.target::text AS target_json, r.attempt, r.max_attempts, r.timeout_seconds, r.epoch, r.due_at,
          r.priority, r.traceparent, extract(epoch FROM now() - r.due_at) AS lag;

-- name: claim_hinted_runs
-- fires: job_runs_count_group_runs, job_runs_flow_control, job_runs_queue_changed
-- The hot-index path: claim exactly the ids Redis suggested, under the same predicates as the scan.
-- An id that is no longer pending and due (a stale hint) matches nothing and is dropped. Like the
-- scan's fast path, it claims nothing when one tenant holds more than `cap` of the hinted runs: the
-- caller then takes the scan's fair path, so the per-tenant cap holds on both paths. Redis orders
-- hints by due time alone, so it also claims nothing when a due run more urgent than the least
-- urgent hint waits un-hinted (one probe of run_queue_due; none when every run has
-- the same priority): the scan then takes the more urgent one first.
-- [lo, hi) are the days the ids name, so only those partitions are read; `:floor`..`:ceiling` are
-- the scan's bounds, for the priority probe. The runs are locked first, as every writer but the scan
-- claim locks them (migration 0017): their queue rows follow by trigger.
WITH paused AS (
    -- As in claim_due_runs: a run of a paused job or tenant is never claimed.
    SELECT tenant_id, name FROM jobs WHERE paused
    UNION ALL
    SELECT id, NULL FROM tenants WHERE paused
),
hinted AS (
    SELECT id, scheduled_at, tenant_id, priority FROM job_runs r
    WHERE id = ANY(CAST(:ids AS uuid[])) AND status = 'pending' AND held IS NULL AND due_at <= now()
      AND scheduled_at >= :lo AND scheduled_at < :hi
      AND NOT EXISTS (SELECT 1 FROM paused p WHERE p.tenant_id = r.tenant_id AND (p.name IS NULL OR p.name = r.job))
    FOR UPDATE SKIP LOCKED
),
crowded AS (
    SELECT EXISTS (SELECT 1 FROM hinted GROUP BY tenant_id HAVING count(*) > :per_tenant_cap)
        OR EXISTS (SELECT 1 FROM run_queue r
                   WHERE r.state = scheduler_queue_pending() AND r.due_at <= now()
                     AND r.priority < (SELECT max(priority) FROM hinted)
                     AND r.scheduled_at >= :floor AND r.scheduled_at <= :ceiling
                     AND r.id <> ALL(CAST(:ids AS uuid[]))) AS yes
)
UPDATE job_runs r
SET status = 'dispatched', epoch = r.epoch + 1, lease_owner = :owner,
    lease_expires_at = now() + make_interval(secs => :lease_seconds), dispatched_at = now()
FROM hinted h
WHERE r.id = h.id AND r.scheduled_at = h.scheduled_at AND NOT (SELECT yes FROM crowded)
  AND r.scheduled_at >= :lo AND r.scheduled_at < :hi
RETURNING r.id, r.scheduled_at, r.tenant_id, r.job, r.payload::text AS payload_json,
          r.target::text AS target_json, r.attempt, r.max_attempts, r.timeout_seconds, r.epoch, r.due_at,
          r.priority, r.traceparent, extract(epoch FROM now() - r.due_at) AS lag;

-- name: pending_among
-- Hinted ids the hot path popped but did not claim (over the cap, or locked by another engine) that
-- are still pending: they go back into the index. Stale ones are not returned and so are forgotten.
SELECT id, due_at FROM job_runs
WHERE id = ANY(CAST(:ids AS uuid[])) AND status = 'pending' AND held IS NULL AND scheduled_at >= :lo AND scheduled_at < :hi;

-- name: release_unpublished_runs
-- fires: job_runs_count_group_runs, job_runs_flow_control, job_runs_queue_changed
-- A publish that failed or timed out: back to pending at once, nothing marked sent that was not acked.
-- The epoch stays bumped, so a message that did reach the stream after all is stale on arrival.
UPDATE job_runs r SET status = 'pending', lease_owner = NULL, lease_expires_at = NULL, dispatched_at = NULL
FROM scheduler_epoch_fence(:ids, :scheduled_ats, :epochs) AS m
WHERE r.id = m.id AND r.scheduled_at = m.scheduled_at AND r.epoch = m.epoch AND r.status = 'dispatched'
  AND r.scheduled_at >= :lo AND r.scheduled_at <= :hi
RETURNING r.id, r.scheduled_at, r.due_at;

-- name: fail_unbuildable_runs
-- fires: job_runs_count_group_runs, job_runs_failure_streak, job_runs_flow_control, job_runs_queue_changed, job_runs_record_callback, job_runs_settle_dependents
-- Claimed runs whose message cannot be built (a payload nested deeper than the message encoding
-- allows, a value that does not decode): each fails alone, now, with the reason. Left dispatched, it
-- killed the engine that claimed it and, after the lease, the next one. Fenced on the claim's epoch;
-- no attempt is consumed, since none started.
UPDATE job_runs r SET status = 'failed', finished_at = now(), last_error = m.error,
    lease_owner = NULL, lease_expires_at = NULL
FROM unnest(CAST(:ids AS uuid[]), CAST(:scheduled_ats AS timestamptz[]), CAST(:epochs AS bigint[]),
            CAST(:errors AS text[]))
     AS m(id, scheduled_at, epoch, error)
WHERE r.id = m.id AND r.scheduled_at = m.scheduled_at AND r.epoch = m.epoch AND r.status = 'dispatched'
  AND r.scheduled_at >= :lo AND r.scheduled_at <= :hi
RETURNING r.id;

-- name: claim_floor
-- The oldest unfinished run's scheduled_at: the claim's lower partition bound. Pending, dispatched
-- and running all count, since the reaper can send the latter two back to pending. The database's
-- now() comes along, so the claim's upper bound is on the database's clock too, and so does the
-- latest scheduled_at of a pending run due before it (pulled forward by a reschedule or a retry):
-- the claim's ceiling reaches it. Its partial index is empty unless runs are pulled forward.
-- Both read run_queue, which holds exactly the unfinished runs (migration 0017).
SELECT COALESCE(min(scheduled_at), now()) AS floor, now() AS db_now,
       (SELECT max(scheduled_at) FROM run_queue WHERE state IN (scheduler_queue_pending(), scheduler_queue_held()) AND due_at < scheduled_at)
           AS pulled_forward
FROM run_queue;

-- name: due_backlog
-- The due backlog still pending, for the engines' autoscaler and alerts: its oldest age and its size,
-- read from the database, not from claims, so they keep rising when every engine is stalled. The size is
-- counted up to :limit, so the cost stays bounded however deep the backlog. Both read run_queue_due,
-- keyed (priority, due_at): the oldest is the least of one probe per priority. (job_runs needed
-- partition bounds here, a pulled-forward run's scheduled_at among them; run_queue is one table.)
SELECT COALESCE(extract(epoch FROM now() - min(o.due_at)), 0) AS oldest_age,
       (SELECT count(*) FROM (
            SELECT 1 FROM run_queue WHERE state = scheduler_queue_pending() AND due_at <= now() LIMIT :limit) AS d) AS runs
FROM generate_series(0, 9) AS p(priority)
CROSS JOIN LATERAL (
    SELECT min(due_at) AS due_at FROM run_queue
    WHERE state = scheduler_queue_pending() AND priority = p.priority AND due_at <= now()
) AS o;

-- ─────────────────────────────────── reaper ─────────────────────────────────

-- name: reap_dispatched_runs
-- fires: job_runs_count_group_runs, job_runs_flow_control, job_runs_queue_changed
-- A dispatched run whose lease lapsed never started: back to pending, no attempt consumed. Only if
-- it was claimed before :claimed_before (null: no bound), the time from which a message may still
-- wait in the stream: a run queued behind slow workers is not lost, and re-sending it only doubled
-- the work and the stale starts (issue 14).
WITH expired AS (
    SELECT id, scheduled_at FROM run_queue
    WHERE state = scheduler_queue_dispatched() AND lease_expires_at < now()
      AND COALESCE(dispatched_at, '-infinity') < COALESCE(CAST(:claimed_before AS timestamptz), 'infinity')
    ORDER BY lease_expires_at
    LIMIT :limit
),
runs AS (
    -- The runs, by id within their days (as the claim finds them), locked without waiting and checked
    -- on their own row: the queue only found them (migration 0017).
    SELECT r.id, r.scheduled_at FROM job_runs r
    WHERE r.id = ANY(ARRAY(SELECT id FROM expired)) AND r.scheduled_at = ANY(ARRAY(SELECT scheduled_at FROM expired))
      AND r.scheduled_at >= (SELECT min(scheduled_at) FROM expired)
      AND r.scheduled_at <= (SELECT max(scheduled_at) FROM expired)
      AND r.status = 'dispatched' AND r.lease_expires_at < now()
    FOR UPDATE OF r SKIP LOCKED
)
UPDATE job_runs r SET status = 'pending', lease_owner = NULL, lease_expires_at = NULL, dispatched_at = NULL
FROM runs e
WHERE r.id = e.id AND r.scheduled_at = e.scheduled_at
RETURNING r.id, r.scheduled_at, r.due_at;

-- name: reap_running_runs
-- fires: job_runs_count_group_runs, job_runs_failure_streak, job_runs_flow_control, job_runs_queue_changed, job_runs_record_callback, job_runs_settle_dependents
-- A running run whose heartbeat lapsed lost its worker: the attempt is consumed (appended to the
-- history as `lost`), then retry with backoff or fail. A late result from that worker no longer matches status 'running' at this epoch.
WITH expired AS (
    SELECT id, scheduled_at FROM run_queue
    WHERE state = scheduler_queue_running() AND lease_expires_at < now()
    ORDER BY lease_expires_at
    LIMIT :limit
),
runs AS (
    -- The runs, by id within their days (as the claim finds them), locked without waiting and checked
    -- on their own row: the queue only found them (migration 0017).
    SELECT r.id, r.scheduled_at FROM job_runs r
    WHERE r.id = ANY(ARRAY(SELECT id FROM expired)) AND r.scheduled_at = ANY(ARRAY(SELECT scheduled_at FROM expired))
      AND r.scheduled_at >= (SELECT min(scheduled_at) FROM expired)
      AND r.scheduled_at <= (SELECT max(scheduled_at) FROM expired)
      AND r.status = 'running' AND r.lease_expires_at < now()
    FOR UPDATE OF r SKIP LOCKED
)
UPDATE job_runs r SET
    status = CASE WHEN r.attempt < r.max_attempts THEN 'pending' ELSE 'failed' END,
    due_at = CASE WHEN r.attempt < r.max_attempts
                  THEN now() + make_interval(secs => r.backoff_seconds * power(2, r.attempt - 1)
                                                   * (0.75 + random() * 0.5))
                  ELSE r.due_at END,
    finished_at = CASE WHEN r.attempt < r.max_attempts THEN NULL ELSE now() END,
    last_error = 'lease expired: the worker stopped heartbeating',
    attempts = scheduler_append_attempt(r.attempts, r.max_attempts, r.attempt, r.epoch, r.lease_owner,
                                        r.started_at, 'lost', 'lease expired: the worker stopped heartbeating',
                                        NULL),
    lease_owner = NULL, lease_expires_at = NULL
FROM runs e
WHERE r.id = e.id AND r.scheduled_at = e.scheduled_at
RETURNING r.id, r.scheduled_at, r.due_at, r.status;

-- name: expire_runs
-- fires: job_runs_count_group_runs, job_runs_flow_control, job_runs_queue_changed, job_runs_record_callback, job_runs_settle_dependents
-- The engines' sweep (app/engine/expiry.py): runs not started by their deadline end 'expired', no
-- attempt consumed, whether pending, held (paused, waiting for a slot or a window) or dispatched (a
-- worker that receives one acks and drops it: its start finds no 'dispatched' row). Found through
-- run_queue_expiring (migration 0019), which holds only the runs with a deadline still to meet,
-- soonest first; the runs are then locked without waiting and checked on their own row, as the
-- reaper does, so engines sweeping at once split the work, and a run a writer holds this instant is
-- left to the next pass.
WITH due AS (
    SELECT id, scheduled_at FROM run_queue
    WHERE expires_at <= now()
    ORDER BY expires_at
    LIMIT :limit
),
runs AS (
    SELECT r.id, r.scheduled_at FROM job_runs r
    WHERE r.id = ANY(ARRAY(SELECT id FROM due)) AND r.scheduled_at = ANY(ARRAY(SELECT scheduled_at FROM due))
      AND r.scheduled_at >= (SELECT min(scheduled_at) FROM due)
      AND r.scheduled_at <= (SELECT max(scheduled_at) FROM due)
      AND r.status IN ('pending', 'dispatched') AND scheduler_start_deadline(r.attempt, r.expires_at) <= now()
    FOR UPDATE OF r SKIP LOCKED
)
UPDATE job_runs r SET status = 'expired', finished_at = now(), last_error = :expired_error,
    lease_owner = NULL, lease_expires_at = NULL
FROM runs e
WHERE r.id = e.id AND r.scheduled_at = e.scheduled_at
RETURNING r.id;

-- ─────────────────────────────────── worker ─────────────────────────────────

-- name: start_runs
-- fires: job_runs_count_group_runs, job_runs_failure_streak, job_runs_flow_control, job_runs_queue_changed, job_runs_record_callback, job_runs_settle_dependents
-- dispatched -> running, fenced: only the delivery whose epoch matches starts, and only once. Rows
-- not returned were duplicates, stale epochs or cancelled (or expired already); refused and expired
-- ones come back with no attempt. The worker acks and drops them all.
-- An `inline` run has nothing to execute (a noop target): nothing can happen between its start and
-- its end, so it goes straight to succeeded in this one write instead of two (the second write was
-- a third of a noop run's database work). lease_owner stays set on an inline success: it names the
-- worker of the run's last attempt (its history entry, read from the columns: nothing more written).
-- A run past its deadline to start (expires_at, migration 0019) is not started: it ends 'expired'
-- here, no attempt consumed, so no run starts after its deadline whenever the sweep comes. A run
-- whose job or tenant is paused is refused: back to pending, where the flow trigger holds it
-- (migration 0018), no attempt consumed. So a pause reaches every run not yet started, those
-- already dispatched to workers included. `expired` and `refused` are written whether or not they
-- are read (a data-modifying WITH always runs); on the default path no run anywhere is past a
-- deadline and nothing is paused, their one-time filters skip them whole, and the start pays three
-- empty partial-index reads. The later steps leave out the rows past their deadline (a statement
-- changes a row once) by testing it again, not by reading `expired`: a join with it cost the
-- default path's start up to a tenth more.
WITH paused AS (
    SELECT tenant_id, name FROM jobs WHERE paused
    UNION ALL
    SELECT id, NULL FROM tenants WHERE paused
),
expired AS (
    UPDATE job_runs r SET status = 'expired', finished_at = now(), last_error = :expired_error,
        lease_owner = NULL, lease_expires_at = NULL
    FROM scheduler_epoch_fence(:ids, :scheduled_ats, :epochs) AS m
    WHERE EXISTS (SELECT 1 FROM run_queue WHERE expires_at <= now())
      AND r.id = m.id AND r.scheduled_at = m.scheduled_at AND r.epoch = m.epoch AND r.status = 'dispatched'
      AND r.scheduled_at >= :lo AND r.scheduled_at <= :hi
      AND scheduler_start_deadline(r.attempt, r.expires_at) <= now()
    RETURNING r.id
),
refused AS (
    UPDATE job_runs r SET status = 'pending', lease_owner = NULL, lease_expires_at = NULL, dispatched_at = NULL
    FROM scheduler_epoch_fence(:ids, :scheduled_ats, :epochs) AS m
    WHERE EXISTS (SELECT 1 FROM paused)
      AND r.id = m.id AND r.scheduled_at = m.scheduled_at AND r.epoch = m.epoch AND r.status = 'dispatched'
      AND r.scheduled_at >= :lo AND r.scheduled_at <= :hi
      AND EXISTS (SELECT 1 FROM paused p WHERE p.tenant_id = r.tenant_id AND (p.name IS NULL OR p.name = r.job))
      AND (scheduler_start_deadline(r.attempt, r.expires_at) <= now()) IS NOT TRUE
    RETURNING r.id
),
started AS (
    UPDATE job_runs r SET status = CASE WHEN m.inline THEN 'succeeded' ELSE 'running' END,
        attempt = r.attempt + 1, started_at = now(),
        finished_at = CASE WHEN m.inline THEN now() END,
        lease_owner = :owner,
        lease_expires_at = CASE WHEN m.inline THEN NULL ELSE now() + make_interval(secs => :lease_seconds) END
    FROM unnest(CAST(:ids AS uuid[]), CAST(:scheduled_ats AS timestamptz[]), CAST(:epochs AS bigint[]),
                CAST(:inline AS boolean[]))
         AS m(id, scheduled_at, epoch, inline)
    WHERE r.id = m.id AND r.scheduled_at = m.scheduled_at AND r.epoch = m.epoch AND r.status = 'dispatched'
      AND r.scheduled_at >= :lo AND r.scheduled_at <= :hi
      AND NOT EXISTS (SELECT 1 FROM paused p WHERE p.tenant_id = r.tenant_id AND (p.name IS NULL OR p.name = r.job))
      AND (scheduler_start_deadline(r.attempt, r.expires_at) <= now()) IS NOT TRUE
    RETURNING r.id, r.attempt
)
SELECT id, attempt, false AS expired FROM started
UNION ALL
SELECT id, NULL, false FROM refused
UNION ALL
SELECT id, NULL, true FROM expired;

-- name: renew_dispatch_leases
-- fires: job_runs_count_group_runs, job_runs_flow_control, job_runs_queue_changed
-- Runs a worker holds back (their tenant is over its share of the worker's slots) stay dispatched:
-- their dispatch lease is renewed while they wait, so it never lapses into a re-claim under a new
-- epoch, a new message, and the same wait again.
UPDATE job_runs r SET lease_expires_at = now() + make_interval(secs => :lease_seconds)
FROM scheduler_epoch_fence(:ids, :scheduled_ats, :epochs) AS m
WHERE r.id = m.id AND r.scheduled_at = m.scheduled_at AND r.epoch = m.epoch AND r.status = 'dispatched'
  AND r.scheduled_at >= :lo AND r.scheduled_at <= :hi
RETURNING r.id;

-- name: heartbeat_runs
-- fires: job_runs_count_group_runs, job_runs_flow_control, job_runs_queue_changed
-- Extends the leases of everything this worker is running, in one statement per beat.
UPDATE job_runs r SET lease_expires_at = now() + make_interval(secs => :lease_seconds)
FROM scheduler_epoch_fence(:ids, :scheduled_ats, :epochs) AS m
WHERE r.id = m.id AND r.scheduled_at = m.scheduled_at AND r.epoch = m.epoch AND r.status = 'running'
  AND r.scheduled_at >= :lo AND r.scheduled_at <= :hi
RETURNING r.id;

-- name: cancelled_among
-- Which of the runs a heartbeat no longer found running were cancelled in their epoch: their worker
-- stops them (app/worker/cancels.py), when the cancel's notice over NATS did not reach it. Read only
-- for the runs a heartbeat missed, so never on the default path.
SELECT r.id FROM job_runs r
JOIN scheduler_epoch_fence(:ids, :scheduled_ats, :epochs) AS m
  ON r.id = m.id AND r.scheduled_at = m.scheduled_at AND r.epoch = m.epoch
WHERE r.status = 'cancelled' AND r.scheduled_at >= :lo AND r.scheduled_at <= :hi;

-- name: finish_runs
-- fires: job_runs_count_group_runs, job_runs_failure_streak, job_runs_flow_control, job_runs_queue_changed, job_runs_record_callback, job_runs_settle_dependents
-- Records a group of outcomes in one statement: success, retry with jittered exponential backoff
-- (due_at moves, scheduled_at never does, so the run stays in its partition) or failure. Fenced like
-- start_runs: a result whose run was rescued meanwhile matches nothing and is discarded. The same
-- write appends an unsuccessful attempt to the history, and a webhook's success too (for its answer's
-- status, which no column holds; any other success is the row's own columns, its worker the
-- lease_owner kept), and stores a success's result (bounded by the worker); a target that asked
-- for a later retry (Retry-After, already bounded by the worker) sets the delay instead of the
-- backoff. Results arrive as JSON text, as insert_runs' payloads do.
UPDATE job_runs r SET
    status = CASE WHEN m.ok THEN 'succeeded'
                  WHEN r.attempt < r.max_attempts THEN 'pending'
                  ELSE 'failed' END,
    due_at = CASE WHEN NOT m.ok AND r.attempt < r.max_attempts
                  THEN now() + make_interval(secs => COALESCE(m.retry_after,
                           r.backoff_seconds * power(2, r.attempt - 1) * (0.75 + random() * 0.5)))
                  ELSE r.due_at END,
    finished_at = CASE WHEN m.ok OR r.attempt >= r.max_attempts THEN now() ELSE NULL END,
    last_error = CASE WHEN m.ok THEN r.last_error ELSE left(m.error, 2000) END,
    attempts = CASE WHEN m.ok AND m.http_status IS NULL THEN r.attempts
                    ELSE scheduler_append_attempt(r.attempts, r.max_attempts, r.attempt, r.epoch,
                                                  r.lease_owner, r.started_at, m.outcome,
                                                  left(m.error, 2000), m.http_status) END,
    result = CASE WHEN m.ok THEN CAST(m.result AS jsonb) ELSE r.result END,
    result_truncated = CASE WHEN m.ok THEN m.result_truncated ELSE r.result_truncated END,
    lease_owner = CASE WHEN m.ok THEN r.lease_owner END, lease_expires_at = NULL
FROM unnest(CAST(:ids AS uuid[]), CAST(:scheduled_ats AS timestamptz[]), CAST(:epochs AS bigint[]),
            CAST(:oks AS boolean[]), CAST(:errors AS text[]), CAST(:outcomes AS text[]),
            CAST(:http_statuses AS integer[]), CAST(:retry_afters AS float8[]),
            CAST(:results AS text[]), CAST(:results_truncated AS boolean[]))
     AS m(id, scheduled_at, epoch, ok, error, outcome, http_status, retry_after, result, result_truncated)
WHERE r.id = m.id AND r.scheduled_at = m.scheduled_at AND r.epoch = m.epoch AND r.status = 'running'
  AND r.scheduled_at >= :lo AND r.scheduled_at <= :hi
RETURNING r.id, r.scheduled_at, r.status, r.due_at;

-- ─────────────────────────────── callbacks ──────────────────────────────────

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

-- ──────────────────────────────────── cron ──────────────────────────────────

-- name: lock_due_cron_jobs
-- Jobs whose next fire falls inside the horizon. SKIP LOCKED lets engines split the jobs; the
-- unique (tenant_id, job, scheduled_at) index makes a double insert harmless anyway. A job with an
-- overlap policy is taken only once its next fire is due: whether a run of it is still live is
-- decided when the occurrence is made, so it is made at its time, not ahead.
SELECT tenant_id, name, schedule, timezone, misfire, overlap, jitter_seconds, next_fire_at, now() AS db_now
FROM jobs
WHERE schedule IS NOT NULL AND NOT paused AND next_fire_at <= now() + make_interval(secs => :horizon_seconds)
  AND (overlap = 'allow' OR next_fire_at <= now())
ORDER BY next_fire_at
LIMIT :limit
FOR UPDATE SKIP LOCKED;

-- name: insert_cron_runs
-- fires: job_runs_queue_added, job_runs_record_tags
-- The occurrences (oldest first) as runs, held like a submitted run (insert_runs) when the tenant or
-- job is paused or limited; the tenant and its paused jobs read under its flow lock, as there. An
-- occurrence whose run exists already is a no-op (the unique (tenant_id, job, scheduled_at) index):
-- two engines, or a backfill beside the schedule, never make it twice.
-- The job's overlap policy is decided here, in the statement that inserts, under the job's row lock
-- (lock_due_cron_jobs), so two engines never both decide on the same runs. `skip`: nothing while a
-- run of the schedule is live (pending, dispatched, running); `buffer_one`: nothing while one is
-- pending (still to start); otherwise the first occurrence only. A backfill (:backfill) asks for
-- each occurrence whatever runs. The schedule's runs (origin 'cron', backfilled ones included) are
-- read through that unique index from the oldest live run of all (the first of run_queue, which
-- holds every live run), so the look costs the job's runs since then, never its whole history.
-- One row per occurrence, in order: its run (id, scheduled_at, due_at) if this statement made it
-- (nulls: it existed already), and whether the overlap policy dropped it.
-- A run's deadline is its job's expire_after_seconds after the occurrence, as a submitted run's.
-- An occurrence carries its job's default tags.
WITH tenant AS (
    SELECT paused, max_in_flight, paused_jobs FROM scheduler_tenant_flow(:tenant_id)
),
occurrence AS (
    SELECT o.at, o.ord FROM unnest(CAST(:occurrences AS timestamptz[])) WITH ORDINALITY AS o(at, ord)
),
policy AS (
    SELECT CASE WHEN :backfill THEN 'allow' ELSE j.overlap END AS overlap
    FROM jobs j WHERE j.tenant_id = :tenant_id AND j.name = :name
),
blocked AS (
    -- A job that allows overlap (the default) reads no run.
    SELECT CASE WHEN p.overlap = 'allow' THEN false ELSE EXISTS (
        SELECT 1 FROM job_runs r
        WHERE r.tenant_id = :tenant_id AND r.job = :name AND r.origin = 'cron'
          AND r.scheduled_at >= (SELECT min(q.scheduled_at) FROM run_queue q)
          AND (r.status = 'pending' OR (p.overlap = 'skip' AND r.status IN ('dispatched', 'running')))
    ) END AS yes
    FROM policy p
),
chosen AS (
    SELECT o.at, o.ord FROM occurrence o, policy p
    WHERE p.overlap = 'allow' OR (o.ord = 1 AND NOT (SELECT yes FROM blocked))
),
inserted AS (
    INSERT INTO job_runs (id, scheduled_at, tenant_id, job, origin, payload, target, max_attempts,
                          backoff_seconds, timeout_seconds, due_at, priority, callback, held, held_due_at,
                          concurrency_key, expires_at, counts_failures, tags)
    SELECT scheduler_run_id(o.at), o.at, j.tenant_id, j.name, 'cron', j.payload, j.target, j.max_attempts,
           j.backoff_seconds, j.timeout_seconds, h.due_at, j.priority, j.callback, h.held, h.held_due_at,
           h.concurrency_key, o.at + make_interval(secs => j.expire_after_seconds),
           scheduler_counts_failures(j.pause_after_failures), j.tags
    FROM jobs j, tenant t, chosen o,
         LATERAL scheduler_run_hold(t.paused, t.max_in_flight, j.name = ANY(t.paused_jobs), j.concurrency,
                                    j.rate_limit, j.payload, o.at) AS h
    WHERE j.tenant_id = :tenant_id AND j.name = :name
    ON CONFLICT (tenant_id, job, scheduled_at) WHERE origin = 'cron' DO NOTHING
    RETURNING id, scheduled_at, due_at
)
SELECT o.at, i.id, i.scheduled_at, i.due_at, c.ord IS NULL AS overlapped
FROM occurrence o
LEFT JOIN chosen c ON c.ord = o.ord
LEFT JOIN inserted i ON i.scheduled_at = o.at
ORDER BY o.ord;

-- name: lock_job_for_backfill
-- A backfill reads its job under a key-share lock: the job is not deleted meanwhile, while a pause
-- or a PUT of it still goes on (insert_cron_runs reads the pause under the tenant's flow lock).
SELECT schedule, timezone, jitter_seconds FROM jobs
WHERE tenant_id = :tenant_id AND name = :name
FOR KEY SHARE;

-- name: existing_cron_runs
-- Which of these occurrences of the job have their run already: one probe of the unique index each,
-- within the days they span.
SELECT scheduled_at FROM job_runs
WHERE tenant_id = :tenant_id AND job = :name AND origin = 'cron'
  AND scheduled_at = ANY(CAST(:occurrences AS timestamptz[]))
  AND scheduled_at >= :lo AND scheduled_at <= :hi;

-- name: set_next_fire
UPDATE jobs SET next_fire_at = :next_fire_at WHERE tenant_id = :tenant_id AND name = :name;

-- ───────────────────────────────── partitions ───────────────────────────────

-- name: list_day_partitions
-- The day partitions of :parent (job_runs or run_tags).
SELECT c.relname AS name
FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
WHERE i.inhparent = CAST(:parent AS regclass) AND c.relname LIKE :parent || '_p%'
ORDER BY c.relname;

-- name: create_day_partition
SELECT scheduler_create_day_partition(:day);

-- name: retire_day_partition
SELECT scheduler_retire_day_partition(:day);

-- name: create_tags_day_partition
SELECT scheduler_create_tags_day_partition(:day);

-- name: drop_tags_day_partition
SELECT scheduler_drop_tags_day_partition(:day);

-- name: analyze_stale_partitions
-- ANALYZE the partitions that changed by :min_changes rows since their statistics were taken (at
-- most :max_count, one engine at a time); returns the ones analyzed. See migration 0003.
SELECT scheduler_analyze_stale_partitions(:min_changes, :max_count) AS name;

-- name: default_partition_days
-- Days before :before with rows in DEFAULT (created before their partition existed). Runs further
-- ahead stay in DEFAULT until their day comes within the premade window: a tenant scheduling one run
-- per day for a year must not make a year of partitions.
SELECT DISTINCT (scheduled_at AT TIME ZONE 'UTC')::date AS day FROM job_runs_default
WHERE scheduled_at < CAST(:before AS date)::timestamp AT TIME ZONE 'UTC'
ORDER BY day;

-- name: count_default_rows
SELECT count(*) FROM job_runs_default;

-- name: set_lock_timeout
SELECT set_config('lock_timeout', :value, true);

-- name: try_advisory_lock
-- One maintenance leader at a time, held by one session for the length of a pass.
SELECT pg_try_advisory_lock(:key);

-- name: advisory_unlock
SELECT pg_advisory_unlock(:key);

-- ──────────────────────── run dependencies (migration 0023) ────────────────────────

-- name: lock_parents
-- fires: job_runs_count_group_runs, job_runs_flow_control, job_runs_queue_changed
-- The parents a submission names, by id within their days, of this tenant only (another tenant's run
-- is not found, as an unknown id is not): each is row-locked and its dependents counted up, so its
-- end orders against this submission. An end that committed first is read here (the row as it is
-- now); one that comes later waits for this transaction and its trigger then finds these edges.
-- Locked in id order, so two submissions naming the same parents never wait on each other in turn.
WITH k AS (
    SELECT id, count(*) AS n FROM unnest(CAST(:ids AS uuid[])) AS id GROUP BY id
),
locked AS (
    SELECT p.id, p.scheduled_at FROM job_runs p
    WHERE p.id = ANY(CAST(:ids AS uuid[])) AND p.scheduled_at >= :lo AND p.scheduled_at < :hi
      AND p.tenant_id = :tenant_id
    ORDER BY p.id
    FOR NO KEY UPDATE
)
UPDATE job_runs p SET dependents = COALESCE(p.dependents, 0) + k.n
FROM locked l JOIN k ON k.id = l.id
WHERE p.id = l.id AND p.scheduled_at = l.scheduled_at
  AND p.scheduled_at >= :lo AND p.scheduled_at < :hi
RETURNING p.id, p.scheduled_at, p.status;

-- name: insert_dependencies
-- The edges of the runs just submitted; `settled` for a parent that already succeeded (or ended,
-- for an on_parent_failure 'run' edge), as lock_parents read it.
INSERT INTO run_dependencies (child_id, child_scheduled_at, parent_id, parent_scheduled_at, tenant_id, name,
                              on_parent_failure, settled)
SELECT child_id, child_scheduled_at, parent_id, parent_scheduled_at, :tenant_id, name, on_parent_failure, settled
FROM unnest(CAST(:child_ids AS uuid[]), CAST(:child_scheduled_ats AS timestamptz[]), CAST(:parent_ids AS uuid[]),
            CAST(:parent_scheduled_ats AS timestamptz[]), CAST(:names AS text[]),
            CAST(:on_parent_failures AS text[]), CAST(:settleds AS boolean[]))
     AS e(child_id, child_scheduled_at, parent_id, parent_scheduled_at, name, on_parent_failure, settled);

-- name: hold_dependents
-- fires: job_runs_count_group_runs, job_runs_flow_control, job_runs_queue_changed
-- The runs just submitted with parents: each records its parents and how many have not settled it,
-- and is held 'dependencies' while any has not (a hold that outranks the pause or limit it was
-- inserted with: those are decided again when it is released, by the flow trigger). A run that
-- passes its parents' results says so in its target, which its message carries to the worker.
UPDATE job_runs r
SET depends_on = k.depends_on, parents_waiting = k.waiting,
    held = CASE WHEN k.waiting > 0 THEN 'dependencies' ELSE r.held END,
    held_due_at = CASE WHEN k.waiting > 0 AND r.held IS NULL THEN r.due_at ELSE r.held_due_at END,
    due_at = CASE WHEN k.waiting > 0 THEN 'infinity' ELSE r.due_at END,
    target = CASE WHEN k.pass_results THEN r.target || '{"pass_results": true}' ELSE r.target END
FROM unnest(CAST(:ids AS uuid[]), CAST(:scheduled_ats AS timestamptz[]), CAST(:waitings AS smallint[]),
            CAST(:pass_results AS boolean[]), CAST(:depends_ons AS text[]))
     AS i(id, scheduled_at, waiting, pass_results, depends_on_text)
CROSS JOIN LATERAL (SELECT i.id, i.scheduled_at, i.waiting, i.pass_results,
                           CAST(string_to_array(i.depends_on_text, ',') AS uuid[]) AS depends_on) AS k
WHERE r.id = k.id AND r.scheduled_at = k.scheduled_at AND r.status = 'pending'
  AND r.scheduled_at >= :lo AND r.scheduled_at < :hi;

-- name: cancel_orphans
-- fires: job_runs_count_group_runs, job_runs_flow_control, job_runs_queue_changed, job_runs_record_callback, job_runs_settle_dependents
-- Runs just submitted naming a parent that already ended failed, cancelled or expired, with
-- on_parent_failure 'cancel': cancelled at once, their last_error naming it. Their own dependents
-- in the same submission go with them (the settle trigger's walk).
UPDATE job_runs r SET status = 'cancelled', finished_at = now(), last_error = k.reason
FROM unnest(CAST(:ids AS uuid[]), CAST(:scheduled_ats AS timestamptz[]), CAST(:reasons AS text[]))
     AS k(id, scheduled_at, reason)
WHERE r.id = k.id AND r.scheduled_at = k.scheduled_at AND r.status = 'pending'
  AND r.scheduled_at >= :lo AND r.scheduled_at < :hi;

-- name: dependents_of
-- A parent's dependents for its page, the first :limit by id (the edge index's order).
SELECT child_id AS id, name, on_parent_failure, settled FROM run_dependencies
WHERE parent_id = :id ORDER BY child_id LIMIT :limit;

-- name: parent_results
-- What a run that passes its parents' results receives: each parent's result under the name its
-- submission gave it (its ref, or its id). At most 100 parents, each found by its key.
SELECT d.name, p.result FROM run_dependencies d
CROSS JOIN LATERAL (SELECT r.result FROM job_runs r
                    WHERE r.id = d.parent_id AND r.scheduled_at = d.parent_scheduled_at OFFSET 0) AS p
WHERE d.child_id = :id;

-- name: forget_dependencies_of_day
-- The edges of the runs of a day partition just dropped. A run id's leading 48 bits are its
-- scheduled_at in ms, so the day's children are a range of the primary key (child_id, parent_id).
DELETE FROM run_dependencies WHERE child_id >= :lo AND child_id < :hi;
-- ─────────────────────────── groups (fan-in) and events (fan-out) ───────────────────────────
-- Migration 0024. A group's counters of ended runs are kept by a trigger on job_runs
-- (scheduler_count_group_runs), which completes it; these statements add runs to groups, read
-- them, and fire what a completed group owes.

-- name: insert_group
-- A group, with the runs its submission just inserted (carrying its id) counted in :total.
INSERT INTO run_groups (id, tenant_id, name, on_complete, total)
VALUES (:id, :tenant_id, :name, CAST(:on_complete AS jsonb), :total)
RETURNING *;

-- name: add_group_runs
-- Counts runs a submission just inserted into an open group, under the group's row lock, taken
-- after the runs' (a finisher's trigger takes a run's, then its group's). Nothing when the group is
-- another tenant's, unknown or completed: the caller tells which with get_group and rolls back.
UPDATE run_groups SET total = total + :added
WHERE id = :id AND tenant_id = :tenant_id AND completed_at IS NULL
RETURNING *;

-- name: get_group
SELECT * FROM run_groups WHERE id = :id AND tenant_id = :tenant_id;

-- name: group_of_runs
-- The group a replayed submission's runs joined (the first one's that has one).
SELECT group_id FROM job_runs
WHERE id = ANY(CAST(:ids AS uuid[])) AND scheduled_at >= :lo AND scheduled_at < :hi AND group_id IS NOT NULL
LIMIT 1;

-- name: list_groups
-- A tenant's groups, newest first, keyset-paginated on (created_at, id).
SELECT * FROM run_groups
WHERE tenant_id = :tenant_id
  AND (CAST(:cursor_at AS timestamptz) IS NULL OR (created_at, id) < (:cursor_at, :cursor_id))
ORDER BY created_at DESC, id DESC
LIMIT :limit;

-- name: list_group_runs
-- list_runs of one group's runs (job_runs_group: only grouped runs are in it), tags included.
SELECT * FROM job_runs
WHERE group_id = :group_id AND tenant_id = :tenant_id
  AND (CAST(:tags AS text[]) IS NULL OR tags @> CAST(:tags AS text[]))
  AND (CAST(:status AS text) IS NULL OR status = :status)
  AND (CAST(:job AS text) IS NULL OR job = :job)
  AND (CAST(:scheduled_after AS timestamptz) IS NULL OR scheduled_at >= :scheduled_after)
  AND (CAST(:scheduled_before AS timestamptz) IS NULL OR scheduled_at < :scheduled_before)
  AND (CAST(:cursor_at AS timestamptz) IS NULL OR (scheduled_at, id) < (:cursor_at, :cursor_id))
ORDER BY scheduled_at DESC, id DESC
LIMIT :limit;

-- name: claim_completed_groups
-- Completed groups whose completion is owed and due, for one engine: SKIP LOCKED splits them between
-- engines, and the row lock holds until the caller's transaction fires each (or defers it).
SELECT * FROM run_groups
WHERE completed_at IS NOT NULL AND fired_at IS NULL AND (fire_due_at IS NULL OR fire_due_at <= now())
ORDER BY completed_at
LIMIT :limit
FOR UPDATE SKIP LOCKED;

-- name: fire_group
-- What completion owed is made (:run_id, the completion run; null for a callback), or given up on
-- with :error (its job no longer exists): never tried again.
UPDATE run_groups SET fired_at = now(), completion_run_id = :run_id, fire_error = :error, fire_due_at = NULL
WHERE id = :id AND fired_at IS NULL;

-- name: defer_group
-- Completion could not be made now (the tenant's backlog is full): tried again after :delay_seconds.
UPDATE run_groups SET fire_due_at = now() + make_interval(secs => :delay_seconds), fire_error = :error
WHERE id = :id AND fired_at IS NULL;

-- name: delete_old_groups
-- Groups fired longer ago than :retention_days (the runs' history), a bounded batch per pass.
DELETE FROM run_groups WHERE id IN (
    SELECT id FROM run_groups
    WHERE fired_at < now() - make_interval(days => :retention_days)
    LIMIT :limit
);

-- name: insert_group_callback
-- A completed group's callback, in the outbox runs' callbacks use; its day is the group's.
INSERT INTO run_callbacks (run_id, run_scheduled_at, tenant_id, url, group_id)
VALUES (NULL, :created_at, :tenant_id, :url, :id);

-- name: group_callback_states
SELECT DISTINCT ON (group_id) group_id, status, attempts, last_error FROM run_callbacks
WHERE group_id = ANY(CAST(:ids AS uuid[]))
ORDER BY group_id, id DESC;

-- name: subscribed_jobs
-- The tenant's jobs subscribed to an event (jobs_on_events), in name order.
SELECT name FROM jobs
WHERE tenant_id = :tenant_id AND on_events @> ARRAY[CAST(:event AS text)]
ORDER BY name;
-- ───────────────────────────────── audit log ────────────────────────────────
-- audit_events (migration 0026): written by app.services.audit in the change's own transaction,
-- read newest first, its days made and dropped by partition maintenance.

-- name: insert_audit_event
-- `at` is the moment of the write (clock_timestamp: two events of one transaction keep their order).
INSERT INTO audit_events (tenant_id, at, id, actor_type, actor_id, actor_key_id, action, target,
                          request_id, detail)
VALUES (:tenant_id, clock_timestamp(), gen_random_uuid(), :actor_type, :actor_id, :actor_key_id,
        :action, :target, :request_id, CAST(:detail AS jsonb))
RETURNING at, id;

-- name: update_audit_detail
-- A bulk action's one event, its counts brought up to date by each chunk's own transaction.
UPDATE audit_events SET detail = CAST(:detail AS jsonb)
WHERE tenant_id = :tenant_id AND at = :at AND id = :id;

-- name: list_audit_events
-- A tenant's events newest first, after the cursor (at, id) of the previous page's last; of one
-- action where given (audit_events_by_action), else by the key.
SELECT at, id, actor_type, actor_id, actor_key_id, action, target, request_id, detail
FROM audit_events
WHERE tenant_id = :tenant_id
  AND (CAST(:action AS text) IS NULL OR action = :action)
  AND (CAST(:cursor_at AS timestamptz) IS NULL
       OR (at, id) < (CAST(:cursor_at AS timestamptz), CAST(:cursor_id AS uuid)))
ORDER BY at DESC, id DESC
LIMIT :limit;

-- name: create_audit_day_partition
SELECT scheduler_create_audit_day_partition(:day);

-- name: drop_audit_day_partition
SELECT scheduler_drop_audit_day_partition(:day);

-- name: audit_default_days
-- Days before :before with events stranded in DEFAULT (written before their day was made).
SELECT DISTINCT (at AT TIME ZONE 'UTC')::date AS day FROM audit_events_default
WHERE at < CAST(:before AS date)::timestamp AT TIME ZONE 'UTC'
ORDER BY day;
