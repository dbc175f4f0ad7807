-- run_queue: one narrow row per live run (pending, held, dispatched or running) with what the claim,
-- the floor, the reaper and the expiry sweep look up, and the indexes they read. job_runs keeps no
-- index on anything a transition changes, so a run's updates stay HOT on its page; the queue row is
-- what changes index entries (decision 14).
--
-- Statement triggers on job_runs (insert, update, delete, truncate) keep it in step, so every writer
-- keeps it right without knowing it. Its rows are hints to find runs by: every transition still
-- decides on the run's own row (status, epoch, lease). One lags on purpose: a run just started keeps
-- its dispatched row until its first heartbeat (scheduler_queue_changed).
--
-- Lock order: a writer locks its run, then its trigger the run's queue row. The claim finds and locks
-- queue rows first (SKIP LOCKED, so engines split the work), then takes the runs with SKIP LOCKED too,
-- so it never waits for a writer that may be waiting for it.

CREATE TABLE run_queue (
    id                uuid NOT NULL,
    scheduled_at      timestamptz NOT NULL,
    tenant_id         text NOT NULL,
    priority          smallint NOT NULL,
    due_at            timestamptz NOT NULL,
    -- scheduler_queue_state(): 0 scheduler_queue_pending(), 1 scheduler_queue_dispatched(),
    -- 2 scheduler_queue_running(), 3 scheduler_queue_held()
    state             smallint NOT NULL,
    lease_expires_at  timestamptz,
    dispatched_at     timestamptz,
    -- scheduler_start_deadline(): the run's expires_at until its first start.
    expires_at        timestamptz,
    -- Day first: the key answers the claim floor and retention (min(scheduled_at)), and every lookup
    -- of a queue row names both columns.
    PRIMARY KEY (scheduled_at, id)
);
-- The claim: claimable runs, most urgent first, overall and per tenant (the capped claim). Held runs
-- (scheduler_queue_held()) are outside both, so they cost the claim nothing (decision 21).
CREATE INDEX run_queue_due ON run_queue (priority, due_at) WHERE state = 0;
CREATE INDEX run_queue_tenant_due ON run_queue (tenant_id, priority, due_at) WHERE state = 0;
-- The reaper: dispatch and run leases that may have lapsed.
CREATE INDEX run_queue_leased ON run_queue (lease_expires_at) WHERE state IN (1, 2);
-- Runs due before their scheduled_at (run now, reschedule, retry): the claim finds them through it,
-- below its ceiling of scheduled_at.
CREATE INDEX run_queue_pulled_forward ON run_queue (scheduled_at) WHERE state IN (0, 3) AND due_at < scheduled_at;
-- The sweep's read (expire_runs): runs not started yet that have a deadline, soonest first. Only
-- rows with one are in it: on the default path it stays empty and a queue write adds nothing to it.
CREATE INDEX run_queue_expiring ON run_queue (expires_at) WHERE expires_at IS NOT NULL;


-- The states of a queue row, by name; statements say `state = scheduler_queue_pending()`, never a
-- number. Immutable SQL functions of no argument: the planner folds each to its constant while it
-- plans, so to it the condition is `state = 0` and the partial indexes above (whose predicates keep
-- the numbers) match as they would a literal. The column stays a smallint: the row is rewritten at
-- every transition of its run.
CREATE FUNCTION scheduler_queue_pending() RETURNS integer    -- pending and not held: claimable
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT 0 $$;
CREATE FUNCTION scheduler_queue_dispatched() RETURNS integer -- claimed, on its way to a worker
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT 1 $$;
CREATE FUNCTION scheduler_queue_running() RETURNS integer    -- started by a worker
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT 2 $$;
CREATE FUNCTION scheduler_queue_held() RETURNS integer       -- pending and held (paused, waiting for a slot or a window)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT 3 $$;

-- A run's queue state; null for an ended run (it has no queue row).
CREATE FUNCTION scheduler_queue_state(status text, held text) RETURNS smallint
LANGUAGE sql IMMUTABLE AS $$
    SELECT CAST(CASE WHEN $1 = 'pending' AND $2 IS NULL THEN scheduler_queue_pending()
                     WHEN $1 = 'pending' THEN scheduler_queue_held()
                     WHEN $1 = 'dispatched' THEN scheduler_queue_dispatched()
                     WHEN $1 = 'running' THEN scheduler_queue_running() END AS smallint)
$$;

CREATE FUNCTION scheduler_queue_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO run_queue (id, scheduled_at, tenant_id, priority, due_at, state, lease_expires_at, dispatched_at,
                           expires_at)
    SELECT id, scheduled_at, tenant_id, priority, due_at, scheduler_queue_state(status, held),
           lease_expires_at, dispatched_at, scheduler_start_deadline(attempt, expires_at)
    FROM added WHERE status IN ('pending', 'dispatched', 'running');
    RETURN NULL;
END $$;

-- A run that ends leaves the queue; a live one is upserted. An update that changes nothing the queue
-- holds writes nothing to it.
-- The start of a run leaves its queue row as the claim left it: dispatched, under the dispatch lease
-- (migration 0029). A short run then writes its queue row twice (claim, end), not three times: the
-- start's rewrite was a new row version and two index entries (state and lease_expires_at are
-- indexed), a fifth of the python path's database work. The run's first heartbeat, a later
-- transaction, brings the row up to date; the reaper reads dispatched rows for lost runs too, early
-- by as much as the dispatch lease outlasts the run's (reap_running_runs). "The start" is the update
-- that made the run running in this transaction (started_at is its now()). A first attempt with a
-- deadline to start is rewritten all the same, so its deadline leaves run_queue_expiring.
CREATE FUNCTION scheduler_queue_changed() RETURNS trigger LANGUAGE plpgsql AS $$
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

CREATE FUNCTION scheduler_queue_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM run_queue q USING removed r WHERE q.id = r.id AND q.scheduled_at = r.scheduled_at;
    RETURN NULL;
END $$;

CREATE FUNCTION scheduler_queue_emptied() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE run_queue;
    RETURN NULL;
END $$;

CREATE TRIGGER job_runs_queue_added AFTER INSERT ON job_runs REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION scheduler_queue_added();
CREATE TRIGGER job_runs_queue_changed AFTER UPDATE ON job_runs REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION scheduler_queue_changed();
CREATE TRIGGER job_runs_queue_removed AFTER DELETE ON job_runs REFERENCING OLD TABLE AS removed
    FOR EACH STATEMENT EXECUTE FUNCTION scheduler_queue_removed();
CREATE TRIGGER job_runs_queue_emptied AFTER TRUNCATE ON job_runs
    FOR EACH STATEMENT EXECUTE FUNCTION scheduler_queue_emptied();
