-- The runs: job_runs, partitioned by the day of scheduled_at (UTC), and what is computed on a row.
--
-- A run's id is scheduler_run_id(scheduled_at), so an id names its day: every statement reads a run
-- by (id, scheduled_at) and touches one partition. Days are made and retired by 60_partitions.sql;
-- job_runs_default takes a row whose day does not exist yet, so no insert ever fails for want of a
-- range. Write runs through job_runs, never a partition: a statement on one partition fires no
-- statement trigger of the parent (run_queue and run_tags are kept by those).
--
-- job_runs carries no index on anything a transition changes (status, due_at, lease): those live on
-- run_queue (30_run_queue.sql), so a run's updates are HOT, on its page (days have fillfactor 50).

CREATE TABLE job_runs (
    id                uuid NOT NULL,
    scheduled_at      timestamptz NOT NULL,
    tenant_id         text NOT NULL,
    job               text NOT NULL,
    origin            text NOT NULL DEFAULT 'api' CHECK (origin IN ('api', 'cron')),
    status            text NOT NULL DEFAULT 'pending',
    payload           jsonb NOT NULL DEFAULT '{}',
    -- Snapshot of the job at submission, so a run is self-contained and a job edit never changes a
    -- run already in flight.
    target            jsonb NOT NULL,
    max_attempts      integer NOT NULL,
    backoff_seconds   double precision NOT NULL,
    timeout_seconds   double precision NOT NULL,
    attempt           integer NOT NULL DEFAULT 0,
    -- The fence: every claim increments it, and every later transition (start, heartbeat, finish,
    -- reap) names the epoch it holds and changes nothing if it no longer matches.
    epoch             bigint NOT NULL DEFAULT 0,
    -- When the run is next claimable ('infinity' while held).
    due_at            timestamptz NOT NULL,
    lease_owner       text,
    lease_expires_at  timestamptz,
    idempotency_key   text,
    traceparent       text,
    created_at        timestamptz NOT NULL DEFAULT now(),
    dispatched_at     timestamptz,
    started_at        timestamptz,
    finished_at       timestamptz,
    last_error        text,
    -- The closed attempts, newest max_attempts kept (scheduler_append_attempt).
    attempts          jsonb NOT NULL DEFAULT '[]'::jsonb,
    result            jsonb,
    result_truncated  boolean NOT NULL DEFAULT false,
    -- {"url": ..., "on": [statuses]}: job_runs_record_callback writes the outbox row.
    callback          jsonb,
    -- No CHECK: adding one would scan every partition of the history; the API bounds the value.
    priority          smallint NOT NULL DEFAULT 5,
    -- Why a pending run is not claimable ('paused', 'concurrency', 'rate_limit'; null: it is), and
    -- when it was due before it was held. Kept by scheduler_run_hold and scheduler_flow_control.
    held              text,
    held_due_at       timestamptz,
    -- The slot or window key a limited run holds or waits for (scheduler_concurrency_key).
    concurrency_key   text,
    -- The deadline to start by; the expiry sweep ends the run after it (run_queue carries it).
    expires_at        timestamptz,
    -- True on the runs of a job with pause_after_failures, null on every other.
    counts_failures   boolean,
    -- The unique or debounce key the run holds or held; null for a job with neither rule.
    dedupe_key        text,
    tags              text[],
    metadata          jsonb,
    -- Its parents' ids, as submitted (NULL: none); how many of its edges are not settled yet while
    -- it waits (held 'dependencies'); and on a parent, how many edges name it (NULL: nobody depends
    -- on it, so the settle trigger never fires for it). 45_dependencies_groups.sql.
    depends_on        uuid[],
    parents_waiting   smallint,
    dependents        integer,
    group_id          uuid,  -- the run_groups row it counts in, or NULL
    PRIMARY KEY (id, scheduled_at)
) PARTITION BY RANGE (scheduled_at);

-- Maintenance moves these rows into their day once it exists (scheduler_create_day_partition).
CREATE TABLE job_runs_default PARTITION OF job_runs DEFAULT WITH (fillfactor = 50);

-- NOT VALID (on DEFAULT too): validating scans every partition of the history; every row written meets
-- it anyway.
ALTER TABLE job_runs ADD CONSTRAINT job_runs_status_check
    CHECK (status IN ('pending', 'dispatched', 'running', 'succeeded', 'failed', 'cancelled', 'expired')) NOT VALID;

-- Listing a tenant's runs newest first, keyset-paginated.
CREATE INDEX job_runs_tenant_list ON job_runs (tenant_id, scheduled_at DESC, id DESC);
-- Cron occurrences are idempotent across engines (the partition key is part of it, so Postgres allows it).
CREATE UNIQUE INDEX job_runs_cron_occurrence ON job_runs (tenant_id, job, scheduled_at) WHERE origin = 'cron';
-- The keeper's and resume's reads: held runs by reason, job and key, in the order they were due.
-- Only held rows are in it: a run that is never held never enters it.
CREATE INDEX job_runs_held ON job_runs (held, tenant_id, job, concurrency_key, held_due_at) WHERE held IS NOT NULL;
-- A group's runs, newest scheduled first (GET …/runs?group=); only grouped runs are in it.
CREATE INDEX job_runs_group ON job_runs (group_id, scheduled_at DESC, id DESC) WHERE group_id IS NOT NULL;


-- Appends a closed attempt (failed, timed out, lost) to a run's history, keeping the newest
-- max_attempts. One definition for the worker's finish and the reaper.
CREATE FUNCTION scheduler_append_attempt(attempts jsonb, max_attempts integer, attempt integer,
                                         epoch bigint, worker text, started_at timestamptz,
                                         outcome text, error text, http_status integer) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN jsonb_array_length(attempts) < max_attempts THEN attempts
                ELSE COALESCE((SELECT jsonb_agg(t.e ORDER BY t.i)
                               FROM jsonb_array_elements(attempts) WITH ORDINALITY AS t(e, i)
                               WHERE t.i > jsonb_array_length(attempts) - (max_attempts - 1)), '[]') END
        || jsonb_build_array(jsonb_build_object(
               'attempt', attempt, 'epoch', epoch, 'worker', worker, 'started_at', started_at,
               'finished_at', now(), 'outcome', outcome, 'error', error, 'http_status', http_status,
               'duration_ms', round(extract(epoch FROM now() - started_at) * 1000)))
$$;

-- The deadline a run must still meet: its expires_at until its first start, none once it started.
CREATE FUNCTION scheduler_start_deadline(attempt integer, expires_at timestamptz) RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN $1 = 0 THEN $2 END
$$;

-- The runs a batch names with the epoch it holds, as rows (id, scheduled_at, epoch), for the epoch
-- fence: a statement joins them to job_runs on all three, so a run whose epoch moved on (re-claimed,
-- rescued) matches nothing. A SQL function of one SELECT, neither strict nor volatile: the planner
-- inlines it, and the plan is that of the unnest it holds.
CREATE FUNCTION scheduler_epoch_fence(ids uuid[], scheduled_ats timestamptz[], epochs bigint[])
RETURNS TABLE (id uuid, scheduled_at timestamptz, epoch bigint)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT * FROM unnest(ids, scheduled_ats, epochs)
$$;
