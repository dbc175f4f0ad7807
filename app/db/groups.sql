-- Groups of runs (fan-in) and the jobs subscribed to events (fan-out): the statements of
-- app/db/groups.py.
-- Named blocks, loaded by app/db/queries.py (which says how they are written).
--
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
