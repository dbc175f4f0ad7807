-- Flow control (pause, concurrency, rate limits, a tenant's in-flight limit): the statements of
-- app/db/flow.py.
-- Named blocks, loaded by app/db/queries.py (which says how they are written).
--
-- A held run is pending with due_at 'infinity' (its own due time kept in held_due_at), and outside
-- the pending rows of run_queue the claim reads (its state is 3, migration 0017), so holding 100k
-- runs costs the claim nothing; what must count held runs reads job_runs_held.

-- name: wake_flow_keys
-- A job's limits were written: its rate-limited keys are looked at again on the keeper's next pass
-- (a raised or removed limit may give room before the time the old one said).
UPDATE concurrency_slots SET next_at = NULL
WHERE tenant_id = :tenant_id AND job = :name AND next_at IS NOT NULL;

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
-- its cost follows the keys, not the runs they hold back. Held runs may be on any day, so every day
-- is in its plan: planned anew, it took 3.4-3.7 ms with a month of days (39 partitions) and ran in
-- 0.6; the keeper runs it planned generically (0.02 ms to plan, 0.3-0.4 to run), twice a pass,
-- five passes a second, busy or idle (app/db/connection.py; docs/bench.md verdict 41).
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
