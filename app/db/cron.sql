-- Cron: the jobs due within the horizon, their occurrences inserted as runs (the materializer's and a
-- backfill's), their next fire. The statements of app/db/cron.py.
-- Named blocks, loaded by app/db/queries.py (which says how they are written).

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
