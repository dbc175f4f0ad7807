"""Run dependencies: a run may wait for other runs of its tenant (its parents) to succeed.

A dependent run is `pending`, held 'dependencies', out of the claim's indexes like every held run
(migration 0015), until its parents have settled it. `run_dependencies` holds one row per edge (child,
parent), indexed by parent, so a parent's end finds its dependents in one index range; the child
keeps `parents_waiting`, the count of its edges not yet settled, and the parent `dependents`, the
count of its edges (NULL on a run nobody depends on: the trigger below then never fires for it, and
the default path pays one NULL test per updated row). The child's `depends_on` lists its parents'
ids as submitted, so every read of a run shows them with no join.

An edge is settled when its parent succeeds, or, for a child submitted with on_parent_failure 'run',
when its parent ends in any way. The trigger on a parent's end (scheduler_settle_dependents) settles
its edges and counts them down on the children in one set-based statement; a child whose count
reaches 0 is released in that statement, and meets the other holds there as every way into pending
does: a child of a paused job or tenant is held 'paused' instead, a child of a limited job or tenant
waits for its slot or window (scheduler_release_hold), the pause read once under the tenant's flow lock
(scheduler_tenant_flow, migration 0016). Decided per row by the flow trigger instead, it read the
tenant once per released run: 3.8 s of the 5.1 s that releasing 10,000 took on a loaded 2-core host.
The count is decremented under the child's row lock, so two parents ending in concurrent
transactions release it exactly once.

A parent that ends failed, cancelled or expired cancels, in the same statement, every pending run
that depends on it through edges not yet settled with on_parent_failure 'cancel', transitively (one
recursive walk of the edges; the cancelled runs' own triggers find their dependents already
cancelled and only settle their 'run' edges). A run coming back to pending (a retry) while an edge
is unsettled is held 'dependencies' again by the flow trigger.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-04
"""

from app.db.migrations import run_script

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None

# The flow trigger's body (0019's) with the dependencies hold of a run coming back to pending.
FLOW_CONTROL = r"""
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
    -- A run coming back to pending while a parent has not settled it waits for its parents again;
    -- that hold outranks every other (they are decided when it is released).
    IF NEW.status = 'pending' AND OLD.status <> 'pending' AND NEW.parents_waiting > 0 THEN
        IF NEW.held IS NULL THEN
            NEW.held_due_at := NEW.due_at;
            NEW.due_at := 'infinity';
        END IF;
        NEW.held := 'dependencies';
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
-- 0018's condition, but a run leaving its 'dependencies' hold while pending: its release decided
-- its pause or limit hold itself (scheduler_settle_dependents), so the trigger has nothing to do,
-- and a parent's 10,000 dependents do not call it 10,000 times.
DROP TRIGGER job_runs_flow_control ON job_runs;
CREATE TRIGGER job_runs_flow_control BEFORE UPDATE ON job_runs FOR EACH ROW
    WHEN (OLD.concurrency_key IS NOT NULL
          OR (OLD.held IS NOT NULL AND (OLD.held <> 'dependencies' OR NEW.status <> 'pending'
                                        OR NEW.held IS NOT DISTINCT FROM OLD.held))
          OR (NEW.status = 'pending' AND OLD.status <> 'pending'))
    EXECUTE FUNCTION scheduler_flow_control();
"""

UPGRADE = (
    r"""
-- Nullable without a default: metadata only, no rewrite of any partition.
ALTER TABLE job_runs ADD COLUMN depends_on uuid[], ADD COLUMN parents_waiting smallint,
    ADD COLUMN dependents integer;

CREATE TABLE run_dependencies (
    child_id            uuid NOT NULL,
    child_scheduled_at  timestamptz NOT NULL,
    parent_id           uuid NOT NULL,
    parent_scheduled_at timestamptz NOT NULL,
    tenant_id           text NOT NULL,
    -- An edge whose parent succeeded is settled by that (a success is final); `settled` marks the
    -- 'run' edges that another end of the parent settled, and edges written settled.
    -- The key of the parent's result in what the child's target receives (pass_results): the ref the
    -- submission named it by, or its id.
    name                text NOT NULL,
    on_parent_failure   text NOT NULL CHECK (on_parent_failure IN ('cancel', 'run')),
    settled             boolean NOT NULL,
    PRIMARY KEY (child_id, parent_id)
);
-- A parent's end reads its unsettled edges; the dashboard lists a parent's dependents.
CREATE INDEX run_dependencies_parent ON run_dependencies (parent_id);

-- The hold a run released from its parents meets, as every way into pending decides it (the flow
-- trigger, release_paused_runs): 'paused' when its job or tenant is (`paused`), else a wait for its
-- slot or its window's room when its job or tenant is limited (it has a concurrency key), else none.
CREATE FUNCTION scheduler_release_hold(paused boolean, concurrency_key text, tenant_id text, job text)
RETURNS text LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN $1 THEN 'paused'
                WHEN $2 IS NOT NULL THEN scheduler_flow_hold_reason(
                    (SELECT j.rate_limit FROM jobs j WHERE j.tenant_id = $3 AND j.name = $4)) END
$$;

-- A parent's end settles its edges, counts them down on its children (releasing those it was the
-- last one for) and, when it did not succeed, cancels the runs that depend on it through unsettled
-- 'cancel' edges, transitively. Each statement is set-based over the parent's edges: a parent with
-- 10,000 dependents releases them in one UPDATE. Children are found by id within their days
-- (arrays and bounds), so each partition is probed by key, never scanned.
CREATE FUNCTION scheduler_settle_dependents() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    ids uuid[];
    ats timestamptz[];
    ns integer[];
    reasons text[];
    due timestamptz;
    tenant_paused boolean;
    paused_jobs text[];
BEGIN
    -- The edges this end settles. A success is final, so its edges are settled by the parent's
    -- status and are only read here; another end marks the 'run' edges it settles, so a retried
    -- parent that ends again (or succeeds) never counts them down twice.
    IF NEW.status = 'succeeded' THEN
        SELECT array_agg(child_id), array_agg(child_scheduled_at), array_agg(n) INTO ids, ats, ns
        FROM (SELECT d.child_id, d.child_scheduled_at, count(*)::integer AS n FROM run_dependencies d
              WHERE d.parent_id = NEW.id AND NOT d.settled GROUP BY 1, 2) AS k;
    ELSE
        WITH settled AS (
            UPDATE run_dependencies d SET settled = true
            WHERE d.parent_id = NEW.id AND NOT d.settled AND d.on_parent_failure = 'run'
            RETURNING d.child_id, d.child_scheduled_at
        )
        SELECT array_agg(child_id), array_agg(child_scheduled_at), array_agg(n) INTO ids, ats, ns
        FROM (SELECT child_id, child_scheduled_at, count(*)::integer AS n FROM settled GROUP BY 1, 2) AS k;
    END IF;
    IF ids IS NOT NULL THEN
        -- The tenant's pause and paused jobs, read once under its flow lock as insert_runs reads
        -- them (migration 0016): a pause committing meanwhile is waited for and read.
        SELECT f.paused, f.paused_jobs INTO tenant_paused, paused_jobs FROM scheduler_tenant_flow(NEW.tenant_id) f;
        WITH released AS (
            UPDATE job_runs c
            SET parents_waiting = c.parents_waiting - k.n,
                held = CASE WHEN c.held = 'dependencies' AND c.parents_waiting <= k.n
                            THEN scheduler_release_hold(tenant_paused OR c.job = ANY(paused_jobs), c.concurrency_key,
                                                        c.tenant_id, c.job)
                            ELSE c.held END,
                due_at = CASE WHEN c.held = 'dependencies' AND c.parents_waiting <= k.n
                                   AND scheduler_release_hold(tenant_paused OR c.job = ANY(paused_jobs),
                                                              c.concurrency_key, c.tenant_id, c.job) IS NULL
                              THEN c.held_due_at ELSE c.due_at END,
                held_due_at = CASE WHEN c.held = 'dependencies' AND c.parents_waiting <= k.n
                                        AND scheduler_release_hold(tenant_paused OR c.job = ANY(paused_jobs),
                                                                   c.concurrency_key, c.tenant_id, c.job) IS NULL
                                   THEN NULL ELSE c.held_due_at END
            FROM unnest(ids, ats, ns) AS k(id, scheduled_at, n)
            WHERE c.id = k.id AND c.scheduled_at = k.scheduled_at AND c.id = ANY(ids)
              AND c.scheduled_at >= (SELECT min(a) FROM unnest(ats) AS a)
              AND c.scheduled_at <= (SELECT max(a) FROM unnest(ats) AS a)
            RETURNING c.held, c.due_at, c.scheduled_at
        )
        SELECT min(scheduled_at) INTO due FROM released WHERE held IS NULL AND due_at <= now();
        IF due IS NOT NULL THEN
            -- Wakes idle engines at commit, as a submission of runs due now does (app/db/wakeups.py).
            PERFORM pg_notify('scheduler_runs_due', CAST(due AS text));
        END IF;
    END IF;
    -- The walk is the outermost end's: the runs it cancels are all its descendants through
    -- unsettled 'cancel' edges, so their own ends have nothing left to cancel.
    IF NEW.status <> 'succeeded' AND pg_trigger_depth() = 1 THEN
        WITH RECURSIVE doomed(id, scheduled_at, parent_id, parent_status) AS (
            SELECT d.child_id, d.child_scheduled_at, d.parent_id, NEW.status FROM run_dependencies d
            WHERE d.parent_id = NEW.id AND NOT d.settled AND d.on_parent_failure = 'cancel'
            UNION
            SELECT d.child_id, d.child_scheduled_at, d.parent_id, 'cancelled' FROM doomed x
            JOIN run_dependencies d ON d.parent_id = x.id AND NOT d.settled AND d.on_parent_failure = 'cancel'
        )
        SELECT array_agg(id), array_agg(scheduled_at), array_agg(reason) INTO ids, ats, reasons
        FROM (SELECT DISTINCT ON (id) id, scheduled_at,
                     'parent ' || parent_id || ' ended ' || parent_status AS reason
              FROM doomed ORDER BY id, parent_id) AS k;
        IF ids IS NOT NULL THEN
            UPDATE job_runs c SET status = 'cancelled', finished_at = now(), last_error = k.reason,
                lease_owner = NULL, lease_expires_at = NULL
            FROM unnest(ids, ats, reasons) AS k(id, scheduled_at, reason)
            WHERE c.id = k.id AND c.scheduled_at = k.scheduled_at AND c.id = ANY(ids)
              AND c.scheduled_at >= (SELECT min(a) FROM unnest(ats) AS a)
              AND c.scheduled_at <= (SELECT max(a) FROM unnest(ats) AS a)
              AND c.status = 'pending';
        END IF;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER job_runs_settle_dependents AFTER UPDATE ON job_runs FOR EACH ROW
    WHEN (OLD.dependents IS NOT NULL AND NEW.status IS DISTINCT FROM OLD.status
          AND NEW.status IN ('succeeded', 'failed', 'cancelled', 'expired'))
    EXECUTE FUNCTION scheduler_settle_dependents();
"""
    + FLOW_CONTROL
)

# 0019's flow trigger and 0018's condition, verbatim.
DOWNGRADE = r"""
DROP TRIGGER job_runs_flow_control ON job_runs;
CREATE TRIGGER job_runs_flow_control BEFORE UPDATE ON job_runs FOR EACH ROW
    WHEN (OLD.concurrency_key IS NOT NULL OR OLD.held IS NOT NULL
          OR (NEW.status = 'pending' AND OLD.status <> 'pending'))
    EXECUTE FUNCTION scheduler_flow_control();
DROP TRIGGER job_runs_settle_dependents ON job_runs;
DROP FUNCTION scheduler_settle_dependents();
DROP FUNCTION scheduler_release_hold(boolean, text, text, text);
UPDATE job_runs SET held = NULL, due_at = held_due_at, held_due_at = NULL
WHERE held = 'dependencies' AND status = 'pending';
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
                UPDATE concurrency_slots SET next_at = NULL
                WHERE tenant_id = NEW.tenant_id AND job = NEW.job AND key = NEW.concurrency_key
                  AND next_at IS NOT NULL;
            END IF;
        END IF;
    END IF;
    RETURN NEW;
END
$$;
DROP TABLE run_dependencies;
ALTER TABLE job_runs DROP COLUMN depends_on, DROP COLUMN parents_waiting, DROP COLUMN dependents;
"""


def upgrade() -> None:
    run_script(UPGRADE)


def downgrade() -> None:
    run_script(DOWNGRADE)
