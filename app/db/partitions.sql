-- Partition maintenance: the day partitions of job_runs, run_tags and audit_events, DEFAULT,
-- statistics. The statements of app/db/partitions.py.
-- Named blocks, loaded by app/db/queries.py (which says how they are written).

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

-- name: create_audit_day_partition
SELECT scheduler_create_audit_day_partition(:day);

-- name: drop_audit_day_partition
SELECT scheduler_drop_audit_day_partition(:day);

-- name: audit_default_days
-- Days before :before with events stranded in DEFAULT (written before their day was made).
SELECT DISTINCT (at AT TIME ZONE 'UTC')::date AS day FROM audit_events_default
WHERE at < CAST(:before AS date)::timestamp AT TIME ZONE 'UTC'
ORDER BY day;
