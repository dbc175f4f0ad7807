"""Cron schedules that know about overlap, jitter and failures (docs/runs.md, "Cron schedules").

A job's `overlap` (allow, skip, buffer_one) is decided by insert_cron_runs, the statement that
inserts the occurrence; `jitter_seconds` moves each occurrence by an offset of its own, computed by
the materializer (app.services.cron.jittered). Neither needs more than the two columns.

`pause_after_failures` pauses a job after that many of its runs in a row ended failed. Its runs carry
`counts_failures` (set as they are made, like the other snapshots of the job a run takes), and a row
trigger on their end keeps the job's `consecutive_failures`: a success sets it back to 0, a failure
adds one, and the failure that reaches the bound pauses the job as POST …/pause does (paused, its
next fire gone, its pending runs held), in the statement that recorded that failure, so no run of
the job is claimed or started after it commits. The trigger's WHEN reads only the run's own row: a
run of a job without the setting (the default path) pays one NULL test per updated row, no call.

`paused_reason` says who paused a job: `requested` (the API, the dashboard, a PUT) or `failures`.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-08
"""

from app.db.migrations import run_script

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

UPGRADE = r"""
ALTER TABLE jobs
    ADD COLUMN overlap text NOT NULL DEFAULT 'allow' CHECK (overlap IN ('allow', 'skip', 'buffer_one')),
    ADD COLUMN jitter_seconds integer NOT NULL DEFAULT 0 CHECK (jitter_seconds BETWEEN 0 AND 3600),
    ADD COLUMN pause_after_failures integer CHECK (pause_after_failures BETWEEN 1 AND 1000),
    ADD COLUMN consecutive_failures integer NOT NULL DEFAULT 0,
    ADD COLUMN paused_reason text CHECK (paused_reason IN ('requested', 'failures'));
UPDATE jobs SET paused_reason = 'requested' WHERE paused;
-- Nullable without a default: metadata only, no rewrite of any partition. True on the runs of a job
-- with pause_after_failures, null on every other.
ALTER TABLE job_runs ADD COLUMN counts_failures boolean;
-- A new run's counts_failures (insert_runs, insert_cron_runs), from its job's pause_after_failures.
CREATE FUNCTION scheduler_counts_failures(pause_after_failures integer) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN $1 IS NOT NULL THEN true END
$$;

-- A counted run ended (succeeded or failed). The job's row is waited for at most 200 ms: a pause,
-- resume or PUT of the job holds that row while it waits for its tenant's flow lock (migration
-- 0016), which the statement that fired this may hold shared (a run of the tenant retried in the
-- same batch takes it, migration 0018). Waited for without a bound, that is a deadlock the API
-- call would lose (it waited first, so its deadlock check fires first); bounded, this statement
-- fails with lock_not_available instead and its caller records the outcomes again a moment later
-- (the worker's completer, the reaper, as for any transient error), which counts them once, since
-- the failed statement wrote nothing.
-- The pause itself does what POST …/pause does, without waiting on anyone it could deadlock with:
-- the tenant's flow lock is taken only if it is free (a submission in flight then reads the pause
-- as it commits, else its run, unheld, is neither claimed nor started: both refuse a paused job's
-- runs), and the pending runs are held but those another transaction holds this instant, which the
-- keeper holds on its next pass (rehold_paused_runs).
CREATE FUNCTION scheduler_failure_streak() RETURNS trigger LANGUAGE plpgsql AS $$
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
CREATE TRIGGER job_runs_failure_streak AFTER UPDATE ON job_runs FOR EACH ROW
    WHEN (OLD.counts_failures AND NEW.status IN ('succeeded', 'failed') AND OLD.status <> NEW.status)
    EXECUTE FUNCTION scheduler_failure_streak();
"""

DOWNGRADE = r"""
DROP TRIGGER job_runs_failure_streak ON job_runs;
DROP FUNCTION scheduler_failure_streak();
DROP FUNCTION scheduler_counts_failures(integer);
ALTER TABLE job_runs DROP COLUMN counts_failures;
ALTER TABLE jobs DROP COLUMN overlap, DROP COLUMN jitter_seconds, DROP COLUMN pause_after_failures,
    DROP COLUMN consecutive_failures, DROP COLUMN paused_reason;
"""


def upgrade() -> None:
    run_script(UPGRADE)


def downgrade() -> None:
    run_script(DOWNGRADE)
