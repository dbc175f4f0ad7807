"""A run's start leaves its queue row as the claim left it: dispatched, under the dispatch lease.

The start used to rewrite the row (dispatched -> running, the run's lease): a new row version and an
entry in the key and in run_queue_leased, since state and lease_expires_at are indexed. A short run
ends before anything reads that row again. The run's first heartbeat brings the row up to date; the
reaper reads dispatched rows for lost runs too, early by as much as the dispatch lease outlasts the
run's (reap_running_runs), so a lost run is found when it was before. A first attempt with a deadline
to start is rewritten at start as before, so its deadline leaves run_queue_expiring.

Revision ID: 0029
Revises: 0028
Create Date: 2026-12-04
"""

from app.db.migrations import run_script

revision = "0029"
down_revision = "0028"
branch_labels = None
depends_on = None

UPGRADE = r"""
CREATE OR REPLACE FUNCTION scheduler_queue_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM run_queue q USING changed c
    WHERE q.id = c.id AND q.scheduled_at = c.scheduled_at AND c.status NOT IN ('pending', 'dispatched', 'running');
    INSERT INTO run_queue AS q (id, scheduled_at, tenant_id, priority, due_at, state, lease_expires_at, dispatched_at,
                                expires_at)
    SELECT id, scheduled_at, tenant_id, priority, due_at, scheduler_queue_state(status, held),
           lease_expires_at, dispatched_at, scheduler_start_deadline(attempt, expires_at)
    FROM changed WHERE status IN ('pending', 'dispatched', 'running')
      AND (status = 'running' AND started_at = now() AND scheduler_start_deadline(attempt - 1, expires_at) IS NULL)
          IS NOT TRUE
    ON CONFLICT (id, scheduled_at) DO UPDATE
    SET priority = excluded.priority, due_at = excluded.due_at, state = excluded.state,
        lease_expires_at = excluded.lease_expires_at, dispatched_at = excluded.dispatched_at,
        expires_at = excluded.expires_at
    WHERE (q.priority, q.due_at, q.state, q.lease_expires_at, q.dispatched_at, q.expires_at)
          IS DISTINCT FROM (excluded.priority, excluded.due_at, excluded.state, excluded.lease_expires_at,
                            excluded.dispatched_at, excluded.expires_at);
    RETURN NULL;
END $$;
"""

# Back to rewriting the row at start; the rows of runs started meanwhile are brought up to date.
DOWNGRADE = r"""
CREATE OR REPLACE FUNCTION scheduler_queue_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM run_queue q USING changed c
    WHERE q.id = c.id AND q.scheduled_at = c.scheduled_at AND c.status NOT IN ('pending', 'dispatched', 'running');
    INSERT INTO run_queue AS q (id, scheduled_at, tenant_id, priority, due_at, state, lease_expires_at, dispatched_at,
                                expires_at)
    SELECT id, scheduled_at, tenant_id, priority, due_at, scheduler_queue_state(status, held),
           lease_expires_at, dispatched_at, scheduler_start_deadline(attempt, expires_at)
    FROM changed WHERE status IN ('pending', 'dispatched', 'running')
    ON CONFLICT (id, scheduled_at) DO UPDATE
    SET priority = excluded.priority, due_at = excluded.due_at, state = excluded.state,
        lease_expires_at = excluded.lease_expires_at, dispatched_at = excluded.dispatched_at,
        expires_at = excluded.expires_at
    WHERE (q.priority, q.due_at, q.state, q.lease_expires_at, q.dispatched_at, q.expires_at)
          IS DISTINCT FROM (excluded.priority, excluded.due_at, excluded.state, excluded.lease_expires_at,
                            excluded.dispatched_at, excluded.expires_at);
    RETURN NULL;
END $$;
UPDATE run_queue q SET state = scheduler_queue_running(), lease_expires_at = r.lease_expires_at
FROM job_runs r
WHERE r.id = q.id AND r.scheduled_at = q.scheduled_at AND r.status = 'running'
  AND q.state = scheduler_queue_dispatched();
"""


def upgrade() -> None:
    run_script(UPGRADE)


def downgrade() -> None:
    run_script(DOWNGRADE)
