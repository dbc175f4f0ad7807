-- Job definitions, and db_now (the database's clock): the statements of app/db/jobs.py.
-- Named blocks, loaded by app/db/queries.py (which says how they are written).

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

-- name: db_now
SELECT now();
