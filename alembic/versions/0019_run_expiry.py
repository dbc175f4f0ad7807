"""A deadline to start: a run not started by its `expires_at` ends `expired`, no attempt consumed.

A run's deadline is `expires_at` (its own, or its job's `expire_after_seconds` after its scheduled_at);
it holds until the run's first start: a run that has started has met it (an attempt that fails and is
retried later is not expired). scheduler_start_deadline() says so, in one place.

The claim never looks at it. A run past its deadline is ended by a statement that already touches it
(the worker's start ends it `expired` instead, in the same write: start_runs), and otherwise by the
engines' sweep (expire_runs, app/engine/expiry.py), which finds the deadlines in run_queue: the queue
row of a run that has not started carries its deadline, and the partial index run_queue_expiring holds
only the rows that have one. A run without a deadline adds nothing to that index, and job_runs gets no
index at all (its updates stay HOT, migration 0017). Held runs (paused, waiting for a slot or for a
rate limit's room) are live queue rows like the others, so they expire too.

`expired` is terminal: the flow trigger frees an expiring run's slots and its place in a rate limit's
window, as for any end, and the callback trigger records an obligation when the callback's `on` names it.

The status check is replaced NOT VALID: it only grows, so every row passed the narrower one it
replaces, and validating it would read every partition under an exclusive lock to learn nothing. New
rows are checked as before; a new day partition (made LIKE job_runs) has it validated.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-05
"""

from app.db.migrations import run_script

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

UPGRADE = r"""
-- A job's default deadline for its runs: this long after each run's scheduled_at (null: none). The
-- API takes the same bounds (app/api/schemas/jobs.py).
ALTER TABLE jobs ADD COLUMN expire_after_seconds double precision
    CHECK (expire_after_seconds >= 1 AND expire_after_seconds <= 2678400);
-- Nullable without a default: metadata only, no rewrite of any partition.
ALTER TABLE job_runs ADD COLUMN expires_at timestamptz;
ALTER TABLE job_runs DROP CONSTRAINT job_runs_status_check,
    ADD CONSTRAINT job_runs_status_check
    CHECK (status IN ('pending', 'dispatched', 'running', 'succeeded', 'failed', 'cancelled', 'expired')) NOT VALID;

-- The deadline a run must still meet: its expires_at until its first start, none once it started.
CREATE FUNCTION scheduler_start_deadline(attempt integer, expires_at timestamptz) RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN $1 = 0 THEN $2 END
$$;

-- The sweep's read (expire_runs): runs not started yet that have a deadline, soonest first. Only
-- rows with one are in it: on the default path it stays empty and a queue write adds nothing to it.
ALTER TABLE run_queue ADD COLUMN expires_at timestamptz;
CREATE INDEX run_queue_expiring ON run_queue (expires_at) WHERE expires_at IS NOT NULL;

-- 0017's queue triggers, and a queue row carries its run's deadline to start.
CREATE OR REPLACE FUNCTION scheduler_queue_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO run_queue (id, scheduled_at, tenant_id, priority, due_at, state, lease_expires_at, dispatched_at,
                           expires_at)
    SELECT id, scheduled_at, tenant_id, priority, due_at, scheduler_queue_state(status, held),
           lease_expires_at, dispatched_at, scheduler_start_deadline(attempt, expires_at)
    FROM added WHERE status IN ('pending', 'dispatched', 'running');
    RETURN NULL;
END $$;

-- An update that changes nothing the queue holds writes nothing to it.
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

-- 0018's flow trigger, and a run that expires frees its slots as any end does.
CREATE OR REPLACE FUNCTION scheduler_flow_control() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.held IS NOT NULL AND NEW.status <> 'pending' THEN
        NEW.due_at := COALESCE(NEW.held_due_at, NEW.due_at);
        NEW.held := NULL;
        NEW.held_due_at := NULL;
    ELSIF OLD.held IS NOT NULL AND NEW.held IS NOT DISTINCT FROM OLD.held AND NEW.due_at <> 'infinity' THEN
        NEW.held_due_at := NEW.due_at;
        NEW.due_at := 'infinity';
    END IF;
    IF NEW.status = 'pending' AND OLD.status <> 'pending'
       AND (NEW.held IS NULL OR NEW.held IN ('concurrency', 'rate_limit'))
       AND EXISTS (SELECT 1 FROM scheduler_tenant_flow(NEW.tenant_id) f
                   WHERE f.paused OR NEW.job = ANY(f.paused_jobs)) THEN
        IF NEW.held IS NULL THEN
            NEW.held_due_at := NEW.due_at;
            NEW.due_at := 'infinity';
        END IF;
        NEW.held := 'paused';
    END IF;
    IF NEW.concurrency_key IS NOT NULL THEN
        IF NEW.status = 'pending' AND OLD.status NOT IN ('pending', 'dispatched') AND NEW.held IS NULL THEN
            NEW.held := scheduler_flow_hold_reason(
                (SELECT j.rate_limit FROM jobs j WHERE j.tenant_id = NEW.tenant_id AND j.name = NEW.job));
            NEW.held_due_at := NEW.due_at;
            NEW.due_at := 'infinity';
        END IF;
        IF OLD.status = 'dispatched' AND NEW.status IN ('running', 'succeeded') THEN
            UPDATE rate_limit_starts SET started_at = NEW.started_at
            WHERE run_id = NEW.id AND started_at IS NULL;
        END IF;
        IF NEW.status IN ('succeeded', 'failed', 'cancelled', 'expired') OR NEW.held IS NOT NULL THEN
            DELETE FROM concurrency_holders WHERE run_id = NEW.id;
            DELETE FROM rate_limit_starts WHERE run_id = NEW.id AND started_at IS NULL;
            IF FOUND THEN
                -- Its place in the window is free again: the keeper looks at the key on its next pass.
                UPDATE concurrency_slots SET next_at = NULL
                WHERE tenant_id = NEW.tenant_id AND job = NEW.job AND key = NEW.concurrency_key
                  AND next_at IS NOT NULL;
            END IF;
        END IF;
    END IF;
    RETURN NEW;
END
$$;

-- 0008's trigger, and a callback may name `expired`.
DROP TRIGGER job_runs_record_callback ON job_runs;
CREATE TRIGGER job_runs_record_callback AFTER UPDATE OF status ON job_runs
FOR EACH ROW
WHEN (NEW.callback IS NOT NULL AND NEW.status IS DISTINCT FROM OLD.status
      AND NEW.status IN ('succeeded', 'failed', 'cancelled', 'expired') AND (NEW.callback -> 'on') ? NEW.status)
EXECUTE FUNCTION scheduler_record_callback();
"""

DOWNGRADE = r"""
DROP TRIGGER job_runs_record_callback ON job_runs;
-- Expired runs become cancelled, a status the narrower check knows (their last_error says why),
-- while the callback trigger is away: nobody is told twice of one end.
UPDATE job_runs SET status = 'cancelled' WHERE status = 'expired';
CREATE TRIGGER job_runs_record_callback AFTER UPDATE OF status ON job_runs
FOR EACH ROW
WHEN (NEW.callback IS NOT NULL AND NEW.status IS DISTINCT FROM OLD.status
      AND NEW.status IN ('succeeded', 'failed', 'cancelled') AND (NEW.callback -> 'on') ? NEW.status)
EXECUTE FUNCTION scheduler_record_callback();

CREATE OR REPLACE FUNCTION scheduler_flow_control() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.held IS NOT NULL AND NEW.status <> 'pending' THEN
        NEW.due_at := COALESCE(NEW.held_due_at, NEW.due_at);
        NEW.held := NULL;
        NEW.held_due_at := NULL;
    ELSIF OLD.held IS NOT NULL AND NEW.held IS NOT DISTINCT FROM OLD.held AND NEW.due_at <> 'infinity' THEN
        NEW.held_due_at := NEW.due_at;
        NEW.due_at := 'infinity';
    END IF;
    IF NEW.status = 'pending' AND OLD.status <> 'pending'
       AND (NEW.held IS NULL OR NEW.held IN ('concurrency', 'rate_limit'))
       AND EXISTS (SELECT 1 FROM scheduler_tenant_flow(NEW.tenant_id) f
                   WHERE f.paused OR NEW.job = ANY(f.paused_jobs)) THEN
        IF NEW.held IS NULL THEN
            NEW.held_due_at := NEW.due_at;
            NEW.due_at := 'infinity';
        END IF;
        NEW.held := 'paused';
    END IF;
    IF NEW.concurrency_key IS NOT NULL THEN
        IF NEW.status = 'pending' AND OLD.status NOT IN ('pending', 'dispatched') AND NEW.held IS NULL THEN
            NEW.held := scheduler_flow_hold_reason(
                (SELECT j.rate_limit FROM jobs j WHERE j.tenant_id = NEW.tenant_id AND j.name = NEW.job));
            NEW.held_due_at := NEW.due_at;
            NEW.due_at := 'infinity';
        END IF;
        IF OLD.status = 'dispatched' AND NEW.status IN ('running', 'succeeded') THEN
            UPDATE rate_limit_starts SET started_at = NEW.started_at
            WHERE run_id = NEW.id AND started_at IS NULL;
        END IF;
        IF NEW.status IN ('succeeded', 'failed', 'cancelled') OR NEW.held IS NOT NULL THEN
            DELETE FROM concurrency_holders WHERE run_id = NEW.id;
            DELETE FROM rate_limit_starts WHERE run_id = NEW.id AND started_at IS NULL;
            IF FOUND THEN
                -- Its place in the window is free again: the keeper looks at the key on its next pass.
                UPDATE concurrency_slots SET next_at = NULL
                WHERE tenant_id = NEW.tenant_id AND job = NEW.job AND key = NEW.concurrency_key
                  AND next_at IS NOT NULL;
            END IF;
        END IF;
    END IF;
    RETURN NEW;
END
$$;

CREATE OR REPLACE FUNCTION scheduler_queue_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO run_queue (id, scheduled_at, tenant_id, priority, due_at, state, lease_expires_at, dispatched_at)
    SELECT id, scheduled_at, tenant_id, priority, due_at, scheduler_queue_state(status, held),
           lease_expires_at, dispatched_at
    FROM added WHERE status IN ('pending', 'dispatched', 'running');
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION scheduler_queue_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM run_queue q USING changed c
    WHERE q.id = c.id AND q.scheduled_at = c.scheduled_at AND c.status NOT IN ('pending', 'dispatched', 'running');
    INSERT INTO run_queue AS q (id, scheduled_at, tenant_id, priority, due_at, state, lease_expires_at, dispatched_at)
    SELECT id, scheduled_at, tenant_id, priority, due_at, scheduler_queue_state(status, held),
           lease_expires_at, dispatched_at
    FROM changed WHERE status IN ('pending', 'dispatched', 'running')
    ON CONFLICT (id, scheduled_at) DO UPDATE
    SET priority = excluded.priority, due_at = excluded.due_at, state = excluded.state,
        lease_expires_at = excluded.lease_expires_at, dispatched_at = excluded.dispatched_at
    WHERE (q.priority, q.due_at, q.state, q.lease_expires_at, q.dispatched_at)
          IS DISTINCT FROM (excluded.priority, excluded.due_at, excluded.state, excluded.lease_expires_at,
                            excluded.dispatched_at);
    RETURN NULL;
END $$;

DROP INDEX run_queue_expiring;
ALTER TABLE run_queue DROP COLUMN expires_at;
DROP FUNCTION scheduler_start_deadline(integer, timestamptz);
ALTER TABLE job_runs DROP CONSTRAINT job_runs_status_check,
    ADD CONSTRAINT job_runs_status_check
    CHECK (status IN ('pending', 'dispatched', 'running', 'succeeded', 'failed', 'cancelled'));
ALTER TABLE job_runs DROP COLUMN expires_at;
ALTER TABLE jobs DROP COLUMN expire_after_seconds;
"""


def upgrade() -> None:
    run_script(UPGRADE)


def downgrade() -> None:
    run_script(DOWNGRADE)
