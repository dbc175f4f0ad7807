"""The states of a run_queue row get names in SQL: scheduler_queue_pending() (0: pending and not
held, what the claim reads), scheduler_queue_dispatched() (1), scheduler_queue_running() (2) and
scheduler_queue_held() (3), used by app/db/*.sql and the schema's functions instead of bare numbers.

Each is an immutable SQL function of no argument, so the planner folds it to its constant while it
plans: `state = scheduler_queue_pending()` is `state = 0` to it, and the partial indexes of run_queue
(whose predicates keep their numbers) match as before; the claim's plans are unchanged. The column
stays a smallint: a row of the queue is rewritten at every transition of its run, and two bytes with
no lookup is why.

scheduler_epoch_fence(ids, scheduled_ats, epochs) names the rows of a batch's epoch fence, which six
statements spelled out as the same unnest of three casts, and scheduler_slot_keys(tenant_ids, jobs,
keys) the keys of a keeper's pass, which four statements spelled out; both are inlined, so the plans
are unchanged.

scheduler_queue_state and scheduler_failure_streak are redefined to say the names; what they
compute is unchanged.

Revision ID: 0027
Revises: 0022
Create Date: 2026-12-04
"""

from app.db.migrations import run_script

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None

UPGRADE = r"""
CREATE FUNCTION scheduler_queue_pending() RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT 0 $$;
CREATE FUNCTION scheduler_queue_dispatched() RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT 1 $$;
CREATE FUNCTION scheduler_queue_running() RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT 2 $$;
CREATE FUNCTION scheduler_queue_held() RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT 3 $$;

CREATE FUNCTION scheduler_epoch_fence(ids uuid[], scheduled_ats timestamptz[], epochs bigint[])
RETURNS TABLE (id uuid, scheduled_at timestamptz, epoch bigint)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT * FROM unnest(ids, scheduled_ats, epochs)
$$;

CREATE FUNCTION scheduler_slot_keys(tenant_ids text[], jobs text[], keys text[])
RETURNS TABLE (tenant_id text, job text, key text)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT * FROM unnest(tenant_ids, jobs, keys)
$$;

CREATE OR REPLACE FUNCTION scheduler_queue_state(status text, held text) RETURNS smallint
LANGUAGE sql IMMUTABLE AS $$
    SELECT CAST(CASE WHEN $1 = 'pending' AND $2 IS NULL THEN scheduler_queue_pending()
                     WHEN $1 = 'pending' THEN scheduler_queue_held()
                     WHEN $1 = 'dispatched' THEN scheduler_queue_dispatched()
                     WHEN $1 = 'running' THEN scheduler_queue_running() END AS smallint)
$$;

CREATE OR REPLACE FUNCTION scheduler_failure_streak() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    lock_wait text := current_setting('lock_timeout');
    streak integer;
    bound integer;
BEGIN
    PERFORM set_config('lock_timeout', '200ms', true);
    UPDATE jobs j
    SET consecutive_failures = CASE WHEN NEW.status = 'failed' THEN j.consecutive_failures + 1 ELSE 0 END
    WHERE j.tenant_id = NEW.tenant_id AND j.name = NEW.job AND j.pause_after_failures IS NOT NULL
      AND NOT j.paused AND (NEW.status = 'failed' OR j.consecutive_failures <> 0)
    RETURNING j.consecutive_failures, j.pause_after_failures INTO streak, bound;
    PERFORM set_config('lock_timeout', lock_wait, true);
    IF streak IS NULL OR streak < bound THEN
        RETURN NULL;
    END IF;
    UPDATE jobs SET paused = true, paused_reason = 'failures', next_fire_at = NULL, updated_at = now()
    WHERE tenant_id = NEW.tenant_id AND name = NEW.job;
    PERFORM pg_try_advisory_xact_lock(scheduler_tenant_flow_key(NEW.tenant_id));
    -- The unheld ones found as rehold_paused_runs finds them: the tenant's unheld pending runs in
    -- run_queue, then by id within their days (the job's whole history is never read).
    WITH q AS (SELECT id, scheduled_at FROM run_queue
               WHERE tenant_id = NEW.tenant_id AND state = scheduler_queue_pending())
    UPDATE job_runs r SET held = 'paused', held_due_at = r.due_at, due_at = 'infinity'
    FROM (SELECT w.id, w.scheduled_at FROM job_runs w
          WHERE w.id = ANY(ARRAY(SELECT id FROM q)) AND w.scheduled_at = ANY(ARRAY(SELECT scheduled_at FROM q))
            AND w.scheduled_at >= (SELECT min(scheduled_at) FROM q)
            AND w.scheduled_at <= (SELECT max(scheduled_at) FROM q)
            AND w.tenant_id = NEW.tenant_id AND w.job = NEW.job AND w.status = 'pending' AND w.held IS NULL
          FOR UPDATE SKIP LOCKED) AS unheld
    WHERE r.id = unheld.id AND r.scheduled_at = unheld.scheduled_at;
    -- Those waiting for a slot or a window (job_runs_held), which a pause outranks.
    UPDATE job_runs r SET held = 'paused'
    FROM (SELECT w.id, w.scheduled_at FROM job_runs w
          WHERE w.held IN ('concurrency', 'rate_limit') AND w.tenant_id = NEW.tenant_id AND w.job = NEW.job
            AND w.status = 'pending'
          FOR UPDATE SKIP LOCKED) AS waiting
    WHERE r.id = waiting.id AND r.scheduled_at = waiting.scheduled_at;
    RETURN NULL;
END
$$;
"""

DOWNGRADE = r"""
CREATE OR REPLACE FUNCTION scheduler_queue_state(status text, held text) RETURNS smallint
LANGUAGE sql IMMUTABLE AS $$
    SELECT CAST(CASE WHEN $1 = 'pending' AND $2 IS NULL THEN 0 WHEN $1 = 'pending' THEN 3
                     WHEN $1 = 'dispatched' THEN 1 WHEN $1 = 'running' THEN 2 END AS smallint)
$$;

CREATE OR REPLACE FUNCTION scheduler_failure_streak() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    lock_wait text := current_setting('lock_timeout');
    streak integer;
    bound integer;
BEGIN
    PERFORM set_config('lock_timeout', '200ms', true);
    UPDATE jobs j
    SET consecutive_failures = CASE WHEN NEW.status = 'failed' THEN j.consecutive_failures + 1 ELSE 0 END
    WHERE j.tenant_id = NEW.tenant_id AND j.name = NEW.job AND j.pause_after_failures IS NOT NULL
      AND NOT j.paused AND (NEW.status = 'failed' OR j.consecutive_failures <> 0)
    RETURNING j.consecutive_failures, j.pause_after_failures INTO streak, bound;
    PERFORM set_config('lock_timeout', lock_wait, true);
    IF streak IS NULL OR streak < bound THEN
        RETURN NULL;
    END IF;
    UPDATE jobs SET paused = true, paused_reason = 'failures', next_fire_at = NULL, updated_at = now()
    WHERE tenant_id = NEW.tenant_id AND name = NEW.job;
    PERFORM pg_try_advisory_xact_lock(scheduler_tenant_flow_key(NEW.tenant_id));
    -- The unheld ones found as rehold_paused_runs finds them: the tenant's unheld pending runs in
    -- run_queue, then by id within their days (the job's whole history is never read).
    WITH q AS (SELECT id, scheduled_at FROM run_queue WHERE tenant_id = NEW.tenant_id AND state = 0)
    UPDATE job_runs r SET held = 'paused', held_due_at = r.due_at, due_at = 'infinity'
    FROM (SELECT w.id, w.scheduled_at FROM job_runs w
          WHERE w.id = ANY(ARRAY(SELECT id FROM q)) AND w.scheduled_at = ANY(ARRAY(SELECT scheduled_at FROM q))
            AND w.scheduled_at >= (SELECT min(scheduled_at) FROM q)
            AND w.scheduled_at <= (SELECT max(scheduled_at) FROM q)
            AND w.tenant_id = NEW.tenant_id AND w.job = NEW.job AND w.status = 'pending' AND w.held IS NULL
          FOR UPDATE SKIP LOCKED) AS unheld
    WHERE r.id = unheld.id AND r.scheduled_at = unheld.scheduled_at;
    -- Those waiting for a slot or a window (job_runs_held), which a pause outranks.
    UPDATE job_runs r SET held = 'paused'
    FROM (SELECT w.id, w.scheduled_at FROM job_runs w
          WHERE w.held IN ('concurrency', 'rate_limit') AND w.tenant_id = NEW.tenant_id AND w.job = NEW.job
            AND w.status = 'pending'
          FOR UPDATE SKIP LOCKED) AS waiting
    WHERE r.id = waiting.id AND r.scheduled_at = waiting.scheduled_at;
    RETURN NULL;
END
$$;

DROP FUNCTION scheduler_queue_pending();
DROP FUNCTION scheduler_queue_dispatched();
DROP FUNCTION scheduler_queue_running();
DROP FUNCTION scheduler_queue_held();
DROP FUNCTION scheduler_epoch_fence(uuid[], timestamptz[], bigint[]);
DROP FUNCTION scheduler_slot_keys(text[], text[], text[]);
"""


def upgrade() -> None:
    run_script(UPGRADE)


def downgrade() -> None:
    run_script(DOWNGRADE)
