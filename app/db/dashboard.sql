-- The dashboard's aggregate reads (Overview, Failures): the statements of app/db/dashboard.py.
-- Named blocks, loaded by app/db/queries.py (which says how they are written).

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
