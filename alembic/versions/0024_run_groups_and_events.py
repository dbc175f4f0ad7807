"""Groups (fan-in) and events (fan-out).

A group is a row of `run_groups`: its runs carry its id (`job_runs.group_id`), and it keeps counters
of them: `total` (written by the submission that adds runs, under the group's row lock) and one per
terminal status (written by a statement trigger on job_runs, in the transaction that ends a run).
The trigger that brings the ended counters to `total` sets `completed_at` in that same statement:
a group completes in the transaction of its last run's end, exactly once, whatever crashes around
it. What completion owes (one run of `on_complete.job`, or one signed callback) is then made by an
engine's pass (app/engine/groups.py) in one transaction that also sets `fired_at`: made once.

Lock order: a run's row, then its group's. The trigger locks the groups of one statement in id
order (two statements ending runs of the same groups never wait on each other in a cycle); a
submission adding runs to a group inserts them first and locks the group after, as a finisher does.

Counters stop once the group completes: a member retried afterwards changes nothing of it.

Events: a job subscribes with `jobs.on_events` (event names); POST …/events/{name} submits a run of
every subscribed job (found through a GIN index on it).

A group's callback is an outbox row like a run's (`run_callbacks`), with `group_id` and no run:
its `run_scheduled_at` is the group's created_at, so retirement keeps that day until it is delivered.

Revision ID: 0024
Revises: 0022
Create Date: 2026-12-04
"""

from app.db.migrations import run_script

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None

UPGRADE = r"""
CREATE TABLE run_groups (
    id            uuid PRIMARY KEY,
    tenant_id     text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name          text NOT NULL,
    on_complete   jsonb,
    total         integer NOT NULL DEFAULT 0,
    succeeded     integer NOT NULL DEFAULT 0,
    failed        integer NOT NULL DEFAULT 0,
    cancelled     integer NOT NULL DEFAULT 0,
    expired       integer NOT NULL DEFAULT 0,
    created_at    timestamptz NOT NULL DEFAULT now(),
    completed_at  timestamptz,
    -- What completion owes was made (the run, the callback's outbox row), or given up on (fire_error).
    fired_at      timestamptz,
    fire_due_at   timestamptz,  -- the next try at firing, once one was refused (over the quota)
    fire_error    text,
    completion_run_id uuid
);
CREATE INDEX run_groups_tenant ON run_groups (tenant_id, created_at DESC);
-- The engine's pass: completed groups whose completion is still owed.
CREATE INDEX run_groups_unfired ON run_groups (completed_at) WHERE completed_at IS NOT NULL AND fired_at IS NULL;
-- Pruning: groups fired longer ago than the runs' history is kept.
CREATE INDEX run_groups_fired ON run_groups (fired_at) WHERE fired_at IS NOT NULL;

ALTER TABLE job_runs ADD COLUMN group_id uuid;
-- A group's runs, newest scheduled first (GET …/runs?group=); only grouped runs are in it.
CREATE INDEX job_runs_group ON job_runs (group_id, scheduled_at DESC, id DESC) WHERE group_id IS NOT NULL;

ALTER TABLE jobs ADD COLUMN on_events text[];
CREATE INDEX jobs_on_events ON jobs USING gin (on_events) WHERE on_events IS NOT NULL;

ALTER TABLE run_callbacks ALTER COLUMN run_id DROP NOT NULL, ADD COLUMN group_id uuid;
-- A group's delivery state on GET …/groups/{id}.
CREATE INDEX run_callbacks_group ON run_callbacks (group_id) WHERE group_id IS NOT NULL;

-- Counts the runs of groups that end (or, retried, stop being ended) in one statement, and completes
-- every group whose ended runs reach its total. A statement without grouped runs costs one scan of
-- its new rows. The groups are locked in id order before they are written.
CREATE FUNCTION scheduler_count_group_runs() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    ids uuid[];
    s   integer[];
    f   integer[];
    c   integer[];
    e   integer[];
BEGIN
    IF NOT EXISTS (SELECT 1 FROM changed_new WHERE group_id IS NOT NULL) THEN
        RETURN NULL;
    END IF;
    SELECT array_agg(d.group_id ORDER BY d.group_id), array_agg(d.s ORDER BY d.group_id),
           array_agg(d.f ORDER BY d.group_id), array_agg(d.c ORDER BY d.group_id),
           array_agg(d.e ORDER BY d.group_id)
    INTO ids, s, f, c, e
    FROM (
        SELECT n.group_id,
               sum((n.status = 'succeeded')::int - (o.status = 'succeeded')::int) AS s,
               sum((n.status = 'failed')::int - (o.status = 'failed')::int) AS f,
               sum((n.status = 'cancelled')::int - (o.status = 'cancelled')::int) AS c,
               sum((n.status = 'expired')::int - (o.status = 'expired')::int) AS e
        FROM changed_new n JOIN changed_old o ON o.id = n.id AND o.scheduled_at = n.scheduled_at
        WHERE n.group_id IS NOT NULL AND n.status IS DISTINCT FROM o.status
        GROUP BY n.group_id
    ) d
    WHERE d.s <> 0 OR d.f <> 0 OR d.c <> 0 OR d.e <> 0;
    IF ids IS NULL THEN
        RETURN NULL;
    END IF;
    PERFORM 1 FROM run_groups WHERE id = ANY(ids) AND completed_at IS NULL ORDER BY id FOR UPDATE;
    UPDATE run_groups g SET
            succeeded = g.succeeded + d.s, failed = g.failed + d.f,
            cancelled = g.cancelled + d.c, expired = g.expired + d.e,
            completed_at = CASE WHEN g.succeeded + d.s + g.failed + d.f + g.cancelled + d.c
                                     + g.expired + d.e >= g.total THEN now() END
        FROM unnest(ids, s, f, c, e) AS d(id, s, f, c, e)
        WHERE g.id = d.id AND g.completed_at IS NULL;
    RETURN NULL;
END
$$;

CREATE TRIGGER job_runs_count_group_runs AFTER UPDATE ON job_runs
REFERENCING OLD TABLE AS changed_old NEW TABLE AS changed_new
FOR EACH STATEMENT EXECUTE FUNCTION scheduler_count_group_runs();
"""

DOWNGRADE = r"""
DROP TRIGGER job_runs_count_group_runs ON job_runs;
DROP FUNCTION scheduler_count_group_runs();
DELETE FROM run_callbacks WHERE run_id IS NULL;
ALTER TABLE run_callbacks DROP COLUMN group_id, ALTER COLUMN run_id SET NOT NULL;
DROP INDEX jobs_on_events;
ALTER TABLE jobs DROP COLUMN on_events;
DROP INDEX job_runs_group;
ALTER TABLE job_runs DROP COLUMN group_id;
DROP TABLE run_groups;
"""


def upgrade() -> None:
    run_script(UPGRADE)


def downgrade() -> None:
    run_script(DOWNGRADE)
