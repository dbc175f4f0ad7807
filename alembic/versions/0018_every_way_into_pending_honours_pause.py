"""Every way a run comes back to pending honours a pause, in the statement that brings it back.

A submission and a cron occurrence decide their hold as they are inserted (scheduler_run_hold). The
other ways into pending — a retry, the reaper's rescue of a lapsed lease, a publish that failed, an
attempt that failed with attempts left, a start refused because of a pause — went through the flow
trigger only for limited or held runs, so a retried run of a paused job or tenant was pending, due
and unheld until the keeper's next pass, and the engine (woken by the retry's NOTIFY) claimed it
first. Now the trigger also fires on every transition into pending and holds the run 'paused' when
its job or tenant is: read under the tenant's flow lock (scheduler_tenant_flow, migration 0016), so a
pause committing meanwhile is waited for and read, and a pause that comes later holds the run itself.
A pause outranks a wait for a slot or a window: a run held for one of those is held 'paused' instead,
as hold_paused_runs does.

The default path pays one more comparison of two status values per updated row: the claim, the start
and a success never move a run into pending.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-04
"""

from app.db.migrations import run_script

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

# 0013's body, with the pause decided first for a run coming back to pending.
UPGRADE = r"""
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
DROP TRIGGER job_runs_flow_control ON job_runs;
CREATE TRIGGER job_runs_flow_control BEFORE UPDATE ON job_runs FOR EACH ROW
    WHEN (OLD.concurrency_key IS NOT NULL OR OLD.held IS NOT NULL
          OR (NEW.status = 'pending' AND OLD.status <> 'pending'))
    EXECUTE FUNCTION scheduler_flow_control();
"""

DOWNGRADE = r"""
DROP TRIGGER job_runs_flow_control ON job_runs;
CREATE TRIGGER job_runs_flow_control BEFORE UPDATE ON job_runs FOR EACH ROW
    WHEN (OLD.concurrency_key IS NOT NULL OR OLD.held IS NOT NULL)
    EXECUTE FUNCTION scheduler_flow_control();
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
                UPDATE concurrency_slots SET next_at = NULL
                WHERE tenant_id = NEW.tenant_id AND job = NEW.job AND key = NEW.concurrency_key
                  AND next_at IS NOT NULL;
            END IF;
        END IF;
    END IF;
    RETURN NEW;
END
$$;
"""


def upgrade() -> None:
    run_script(UPGRADE)


def downgrade() -> None:
    run_script(DOWNGRADE)
