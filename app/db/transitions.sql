-- A run's transitions after its insert: the engine's claim and dispatch, the reaper's, and the
-- worker's start, lease and end. The statements of app/db/transitions.py.
-- Named blocks, loaded by app/db/queries.py (which says how they are written).

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
-- It names no day (its runs are found by the queue): run planned_generically (app/db/connection.py).
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
-- A run started since its claim still has its dispatched queue row (a start leaves it:
-- scheduler_queue_changed) until its first heartbeat. Its own lease lapses `:lead` seconds before
-- that row's at the earliest (the dispatch lease less the run's: it started after its claim), so
-- dispatched rows are read that much early, in the same lease order (runs are started in the order
-- they were claimed, so those started come first). Of their runs, one still running under a live
-- lease is `moved_on`: a write of its own lease, whose trigger brings the queue row up to date, so
-- it is not read again until its real lease lapses. One still dispatched is the other reaper's
-- (reap_dispatched_runs).
-- It names no day (its runs are found by the queue): run planned_generically (app/db/connection.py).
WITH expired AS (
    SELECT id, scheduled_at FROM run_queue
    WHERE state IN (scheduler_queue_dispatched(), scheduler_queue_running())
      AND lease_expires_at < now() + make_interval(secs => :lead)
      AND (state = scheduler_queue_dispatched() OR lease_expires_at < now())
    ORDER BY lease_expires_at
    LIMIT :limit
),
found AS (
    -- The runs, by id within their days (as the claim finds them), locked without waiting and checked
    -- on their own row: the queue only found them (migration 0017).
    SELECT r.id, r.scheduled_at, r.lease_expires_at < now() AS lapsed FROM job_runs r
    WHERE r.id = ANY(ARRAY(SELECT id FROM expired)) AND r.scheduled_at = ANY(ARRAY(SELECT scheduled_at FROM expired))
      AND r.scheduled_at >= (SELECT min(scheduled_at) FROM expired)
      AND r.scheduled_at <= (SELECT max(scheduled_at) FROM expired)
      AND r.status = 'running'
    FOR UPDATE OF r SKIP LOCKED
),
moved_on AS (
    UPDATE job_runs r SET lease_expires_at = r.lease_expires_at
    FROM found f
    WHERE NOT f.lapsed AND r.id = f.id AND r.scheduled_at = f.scheduled_at
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
FROM found e
WHERE e.lapsed AND r.id = e.id AND r.scheduled_at = e.scheduled_at
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
-- It names no day (its runs are found by the queue): run planned_generically (app/db/connection.py).
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
-- not returned were duplicates, stale epochs or cancelled, or not free to start (past their
-- deadline to start, or their job or tenant paused): the caller settles those with
-- settle_unstarted_runs. Apart, the default path plans one UPDATE, not three: with the other two in
-- its statement, as CTEs that found nothing, planning took 0.58 ms a call of 70 runs against 0.23,
-- as long as running it (docs/bench.md verdict 41).
-- An `inline` run has nothing to execute (a noop target): nothing can happen between its start and
-- its end, so it goes straight to succeeded in this one write instead of two (the second write was
-- a third of a noop run's database work). lease_owner stays set on an inline success: it names the
-- worker of the run's last attempt (its history entry, read from the columns: nothing more written).
-- The paused set is read once (MATERIALIZED), not once a run: inlined, it scanned jobs and tenants
-- for each run, a quarter of the statement's time.
WITH paused AS MATERIALIZED (
    SELECT tenant_id, name FROM jobs WHERE paused
    UNION ALL
    SELECT id, NULL FROM tenants WHERE paused
)
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
RETURNING r.id, r.attempt, false AS expired;

-- name: settle_unstarted_runs
-- fires: job_runs_count_group_runs, job_runs_flow_control, job_runs_queue_changed, job_runs_record_callback, job_runs_settle_dependents
-- The runs of a fence start_runs did not start, fenced as it is: a run past its deadline to start
-- (expires_at, migration 0019) ends 'expired', no attempt consumed, so no run starts after its
-- deadline whenever the sweep comes; a run whose job or tenant is paused is refused: back to
-- pending, where the flow trigger holds it (migration 0018), no attempt consumed. So a pause
-- reaches every run not yet started, those already dispatched to workers included. Rows not
-- returned were duplicates, stale epochs or cancelled (or expired already), or were resumed since
-- start_runs read them (the caller starts those). `refused` leaves out the rows past their deadline
-- by testing it again (a statement changes a row once).
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
)
SELECT id, CAST(NULL AS integer) AS attempt, false AS expired FROM refused
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
-- backoff. Results arrive as JSON text, as insert_runs' payloads do. A retry's due_at is returned
-- for the runs-pending hint (app/pending.py), no other run's: the worker decoding two timestamps for
-- every run it recorded cost it ~1 µs a run, a thirtieth of its CPU on a python target.
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
RETURNING r.id, r.status, CASE WHEN r.status = 'pending' THEN r.due_at END AS due_at;
