-- Run dependencies (run_dependencies, migration 0023): the statements of app/db/dependencies.py.
-- Named blocks, loaded by app/db/queries.py (which says how they are written).

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
