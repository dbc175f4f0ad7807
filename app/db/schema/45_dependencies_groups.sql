-- Runs that wait for runs, and groups that report when all of theirs have ended.
--
-- Dependencies: a dependent run is pending, held 'dependencies', out of the claim's indexes like every
-- held run, until its parents have settled it. run_dependencies holds one row per edge, indexed by
-- parent, so a parent's end finds its dependents in one index range; the child keeps parents_waiting
-- (its edges not yet settled), the parent dependents (its edges; NULL when nobody depends on it, so
-- the trigger below never fires for it). An edge is settled when its parent succeeds, or, with
-- on_parent_failure 'run', when its parent ends in any way. The parent's end settles its edges and
-- counts them down on the children in one set-based statement; a child whose count reaches 0 is
-- released there and meets the other holds as every way into pending does (scheduler_release_hold,
-- the pause read once under the tenant's flow lock). The count goes down under the child's row lock,
-- so two parents ending at once release it exactly once. A parent that ends failed, cancelled or
-- expired cancels, in the same statement, every pending run depending on it through unsettled
-- 'cancel' edges, transitively (one recursive walk).
--
-- Groups: a group completes in the transaction that ends its last run (the statement trigger below
-- counts ended runs by status and sets completed_at when they reach total); the engine's GroupFirer
-- then makes what completion owes, once (app/engine/groups.py).

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
