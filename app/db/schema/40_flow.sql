-- Flow control: pauses, concurrency limits (a job's, per key, and a tenant's max_in_flight), rate
-- limits, and a job's pause after failures in a row. Every path that makes a run claimable honours
-- every hold in the same statement: a new run decides its hold as it is inserted
-- (scheduler_run_hold), every other way into pending goes through job_runs_flow_control.
--
-- Lock order: a statement about to make a tenant's runs pending takes the tenant's flow lock
-- (scheduler_tenant_flow, shared) before its runs' rows; a pause, resume or limit change takes it
-- exclusively, so a pause committing meanwhile is waited for and read.

-- One row per key ever limited: the lock that serializes granting its slots, and for a rate-limited
-- key when it next has room (next_at null: now, or a concurrency key).
CREATE TABLE concurrency_slots (
    tenant_id  text NOT NULL,
    job        text NOT NULL,
    key        text NOT NULL,
    next_at    timestamptz,
    PRIMARY KEY (tenant_id, job, key)
);

-- The runs holding a slot now: one row per (run, job), job '' and key '' for the tenant's slot (a
-- job name is never empty, so it cannot collide with a job's key).
CREATE TABLE concurrency_holders (
    run_id     uuid NOT NULL,
    tenant_id  text NOT NULL,
    job        text NOT NULL,
    key        text NOT NULL,
    PRIMARY KEY (run_id, job)
);
CREATE INDEX concurrency_holders_key ON concurrency_holders (tenant_id, job, key);

-- A rate-limited key's window: one row per start granted.
CREATE TABLE rate_limit_starts (
    run_id      uuid NOT NULL,
    tenant_id   text NOT NULL,
    job         text NOT NULL,
    key         text NOT NULL,
    granted_at  timestamptz NOT NULL,
    -- null: granted, not started yet (counts as starting now).
    started_at  timestamptz,
    PRIMARY KEY (run_id, granted_at)
);
CREATE INDEX rate_limit_starts_key ON rate_limit_starts (tenant_id, job, key, started_at);


-- The keys a keeper's pass names, as rows (tenant_id, job, key): a slot's or a window's key of a job,
-- or a tenant's slot (job '' and key ''). A SQL function of one SELECT, neither strict nor volatile:
-- the planner inlines it, and the plan is that of the unnest it holds.
CREATE FUNCTION scheduler_slot_keys(tenant_ids text[], jobs text[], keys text[])
RETURNS TABLE (tenant_id text, job text, key text)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT * FROM unnest(tenant_ids, jobs, keys)
$$;

-- The key of a run: the payload field the job's concurrency (or rate_limit) names ('' when absent),
-- or the job's one key when it names none. Long values are hashed so an index entry stays small.
CREATE FUNCTION scheduler_concurrency_key(concurrency jsonb, payload jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN concurrency IS NULL THEN NULL
                WHEN length(v) > 200 THEN 'md5:' || md5(v) ELSE v END
    FROM (SELECT COALESCE(
            payload #>> string_to_array(substr(concurrency->>'key', length('payload.') + 1), '.'),
            '') AS v) AS k
$$;

-- Why a keyed run waits when it is (re)held: for a rate-limited job's room, else a slot.
CREATE FUNCTION scheduler_flow_hold_reason(rate_limit jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN $1 IS NOT NULL THEN 'rate_limit' ELSE 'concurrency' END
$$;

-- A job's runs holding a slot now (its "in flight" in the API).
CREATE FUNCTION scheduler_job_in_flight(tenant_id text, job text) RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT count(*) FROM concurrency_holders h WHERE h.tenant_id = $1 AND h.job = $2
$$;

-- A tenant's runs holding its slot now (its "in flight" in the API).
CREATE FUNCTION scheduler_tenant_in_flight(tenant_id text) RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT count(*) FROM concurrency_holders h WHERE h.tenant_id = $1 AND h.job = '' AND h.key = ''
$$;

-- The room a keeper's grant has in a tenant's max_in_flight: NULL when it has none, 0 when the
-- granting transaction does not hold the tenant slot's row (`locked`: the tenants whose row it holds).
CREATE FUNCTION scheduler_tenant_room(tenant_id text, max_in_flight integer, locked text[]) RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN $2 IS NULL THEN NULL
                WHEN NOT $1 = ANY($3) THEN 0
                ELSE greatest(0, $2 - scheduler_tenant_in_flight($1)) END
$$;

-- The key of a tenant's flow lock (a hash collision between two tenants only serializes them).
CREATE FUNCTION scheduler_tenant_flow_key(tenant_id text) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT hashtextextended('scheduler.tenant_flow:' || $1, 0)
$$;

-- The tenant's pause, max_in_flight and paused jobs as of now, for a statement about to make its
-- runs pending, whose transaction then holds the tenant's flow lock shared until it ends. Volatile,
-- so its query takes its own snapshot after the lock is granted: the calling statement's would
-- predate a change it waited for.
CREATE FUNCTION scheduler_tenant_flow(tenant_id text)
RETURNS TABLE (paused boolean, max_in_flight integer, paused_jobs text[])
LANGUAGE plpgsql VOLATILE ROWS 1 AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(scheduler_tenant_flow_key($1));
    -- The paused jobs, read from the index jobs_paused: none on the default path.
    RETURN QUERY SELECT t.paused, t.max_in_flight,
                        ARRAY(SELECT j.name FROM jobs j WHERE j.tenant_id = $1 AND j.paused)
                 FROM tenants t WHERE t.id = $1;
END
$$;

-- How a new run starts (insert_runs, insert_cron_runs), from its tenant's settings as
-- scheduler_tenant_flow read them and its job's: held 'paused' when its job or tenant is paused,
-- held for its job's slot or window when the job is limited, held for its tenant's slot when the
-- tenant has a max_in_flight (its key '' when its job has none), else due at `due`.
CREATE FUNCTION scheduler_run_hold(tenant_paused boolean, tenant_max_in_flight integer, job_paused boolean,
                                   concurrency jsonb, rate_limit jsonb, payload jsonb, due timestamptz)
RETURNS TABLE (held text, held_due_at timestamptz, due_at timestamptz, concurrency_key text)
LANGUAGE sql IMMUTABLE AS $$
    SELECT h.held,
           CASE WHEN h.held IS NOT NULL THEN $7 END,
           CASE WHEN h.held IS NOT NULL THEN 'infinity'::timestamptz ELSE $7 END,
           CASE WHEN $2 IS NOT NULL THEN COALESCE(scheduler_concurrency_key(COALESCE($4, $5), $6), '')
                ELSE scheduler_concurrency_key(COALESCE($4, $5), $6) END
    FROM (SELECT CASE WHEN $3 OR $1 THEN 'paused'
                      WHEN $4 IS NOT NULL OR $5 IS NOT NULL THEN scheduler_flow_hold_reason($5)
                      WHEN $2 IS NOT NULL THEN 'concurrency' END AS held) AS h
$$;

-- Runs inside every statement that updates a held run, a run with a concurrency key, or a run coming
-- back to pending, so that no transition, present or future, can make a held run claimable or leak
-- a slot:
-- - a held run that ends (cancelled, expired) is no longer held; its due_at is again when it was due;
-- - a statement that moves a held run's due time moves when it would be due; it stays held;
-- - a run coming back to pending (a retry, the reaper's rescue, a failed publish, a failed attempt
--   with attempts left, a start refused for a pause) is held 'paused' when its job or tenant is,
--   read under the tenant's flow lock; a pause outranks a wait for a slot or a window;
-- - a limited run that comes back to pending from anything but 'dispatched' frees its slot and waits
--   for one (or for the window) again (a run sent back from 'dispatched', never started, keeps its
--   slot and is claimed again);
-- - the start (dispatched -> running, or succeeded for an inline run) gives its window row the start
--   time;
-- - a limited run whose attempt ends (succeeded, failed, cancelled, expired) or that is held again
--   frees its slot and its unstarted window row: exactly once, since only a fenced transition that
--   matched gets here.
CREATE FUNCTION scheduler_flow_control() RETURNS trigger LANGUAGE plpgsql AS $$
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
-- The default path (no limit, not held) pays two NULL tests and one status comparison per updated
-- row: the claim, the start and a success never move a run into pending. A dependent's release
-- (held 'dependencies' -> another hold or none, still pending) does not fire it: the settle trigger
-- decided the hold in the same statement (45_dependencies_groups.sql).
CREATE TRIGGER job_runs_flow_control BEFORE UPDATE ON job_runs FOR EACH ROW
    WHEN (OLD.concurrency_key IS NOT NULL
          OR (OLD.held IS NOT NULL AND (OLD.held <> 'dependencies' OR NEW.status <> 'pending'
                                        OR NEW.held IS NOT DISTINCT FROM OLD.held))
          OR (NEW.status = 'pending' AND OLD.status <> 'pending'))
    EXECUTE FUNCTION scheduler_flow_control();

-- The hold a released dependent meets: 'paused' when its job or tenant is (`paused`, read once by
-- the caller under the tenant's flow lock), else its limit's wait for a slot or window, else none.
CREATE FUNCTION scheduler_release_hold(paused boolean, concurrency_key text, tenant_id text, job text)
RETURNS text LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN $1 THEN 'paused'
                WHEN $2 IS NOT NULL THEN scheduler_flow_hold_reason(
                    (SELECT j.rate_limit FROM jobs j WHERE j.tenant_id = $3 AND j.name = $4)) END
$$;

-- A new run's counts_failures (insert_runs, insert_cron_runs), from its job's pause_after_failures.
CREATE FUNCTION scheduler_counts_failures(pause_after_failures integer) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN $1 IS NOT NULL THEN true END
$$;

-- A counted run ended (succeeded or failed): the job's streak of failures grows or resets, and at
-- its pause_after_failures the job pauses itself. The job's row is waited for at most 200 ms: a
-- pause, resume or PUT of the job holds that row while it waits for its tenant's flow lock, which
-- the statement that fired this may hold shared (a run of the tenant retried in the same batch takes
-- it). Waited for without a bound, that is a deadlock the API call would lose; bounded, this
-- statement fails with lock_not_available instead and its caller records the outcomes again a
-- moment later (the worker's completer, the reaper, as for any transient error), which counts them
-- once, since the failed statement wrote nothing.
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
CREATE TRIGGER job_runs_failure_streak AFTER UPDATE ON job_runs FOR EACH ROW
    WHEN (OLD.counts_failures AND NEW.status IN ('succeeded', 'failed') AND OLD.status <> NEW.status)
    EXECUTE FUNCTION scheduler_failure_streak();
