-- TABLE: job_runs
CREATE TABLE job_runs (
    id uuid NOT NULL,
    scheduled_at timestamp with time zone NOT NULL,
    tenant_id text NOT NULL,
    job text NOT NULL,
    origin text DEFAULT 'api'::text NOT NULL,
    status text DEFAULT 'pending'::text NOT NULL,
    payload jsonb DEFAULT '{}'::jsonb NOT NULL,
    target jsonb NOT NULL,
    max_attempts integer NOT NULL,
    backoff_seconds double precision NOT NULL,
    timeout_seconds double precision NOT NULL,
    attempt integer DEFAULT 0 NOT NULL,
    epoch bigint DEFAULT 0 NOT NULL,
    due_at timestamp with time zone NOT NULL,
    lease_owner text,
    lease_expires_at timestamp with time zone,
    idempotency_key text,
    traceparent text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    dispatched_at timestamp with time zone,
    started_at timestamp with time zone,
    finished_at timestamp with time zone,
    last_error text,
    attempts jsonb DEFAULT '[]'::jsonb NOT NULL,
    result jsonb,
    result_truncated boolean DEFAULT false NOT NULL,
    callback jsonb,
    priority smallint DEFAULT 5 NOT NULL,
    held text,
    held_due_at timestamp with time zone,
    concurrency_key text,
    expires_at timestamp with time zone,
    counts_failures boolean,
    dedupe_key text,
    tags text[],
    metadata jsonb,
    CONSTRAINT job_runs_origin_check CHECK ((origin = ANY (ARRAY['api'::text, 'cron'::text])))
)
PARTITION BY RANGE (scheduled_at);

-- TABLE: job_runs_default
CREATE TABLE job_runs_default (
    id uuid NOT NULL,
    scheduled_at timestamp with time zone NOT NULL,
    tenant_id text NOT NULL,
    job text NOT NULL,
    origin text DEFAULT 'api'::text NOT NULL,
    status text DEFAULT 'pending'::text NOT NULL,
    payload jsonb DEFAULT '{}'::jsonb NOT NULL,
    target jsonb NOT NULL,
    max_attempts integer NOT NULL,
    backoff_seconds double precision NOT NULL,
    timeout_seconds double precision NOT NULL,
    attempt integer DEFAULT 0 NOT NULL,
    epoch bigint DEFAULT 0 NOT NULL,
    due_at timestamp with time zone NOT NULL,
    lease_owner text,
    lease_expires_at timestamp with time zone,
    idempotency_key text,
    traceparent text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    dispatched_at timestamp with time zone,
    started_at timestamp with time zone,
    finished_at timestamp with time zone,
    last_error text,
    attempts jsonb DEFAULT '[]'::jsonb NOT NULL,
    result jsonb,
    result_truncated boolean DEFAULT false NOT NULL,
    callback jsonb,
    priority smallint DEFAULT 5 NOT NULL,
    held text,
    held_due_at timestamp with time zone,
    concurrency_key text,
    expires_at timestamp with time zone,
    counts_failures boolean,
    dedupe_key text,
    tags text[],
    metadata jsonb,
    CONSTRAINT job_runs_origin_check CHECK ((origin = ANY (ARRAY['api'::text, 'cron'::text])))
)
WITH (fillfactor='50');

-- TABLE ATTACH: job_runs_default
ALTER TABLE ONLY job_runs ATTACH PARTITION job_runs_default DEFAULT;

-- CONSTRAINT: job_runs job_runs_pkey
ALTER TABLE ONLY job_runs
    ADD CONSTRAINT job_runs_pkey PRIMARY KEY (id, scheduled_at);

-- CONSTRAINT: job_runs_default job_runs_default_pkey
ALTER TABLE ONLY job_runs_default
    ADD CONSTRAINT job_runs_default_pkey PRIMARY KEY (id, scheduled_at);

-- CHECK CONSTRAINT: job_runs job_runs_status_check
ALTER TABLE job_runs
    ADD CONSTRAINT job_runs_status_check CHECK ((status = ANY (ARRAY['pending'::text, 'dispatched'::text, 'running'::text, 'succeeded'::text, 'failed'::text, 'cancelled'::text, 'expired'::text]))) NOT VALID;

-- INDEX: job_runs_cron_occurrence
CREATE UNIQUE INDEX job_runs_cron_occurrence ON ONLY job_runs USING btree (tenant_id, job, scheduled_at) WHERE (origin = 'cron'::text);

-- INDEX: job_runs_held
CREATE INDEX job_runs_held ON ONLY job_runs USING btree (held, tenant_id, job, concurrency_key, held_due_at) WHERE (held IS NOT NULL);

-- INDEX: job_runs_default_held_tenant_id_job_concurrency_key_held_du_idx
CREATE INDEX job_runs_default_held_tenant_id_job_concurrency_key_held_du_idx ON job_runs_default USING btree (held, tenant_id, job, concurrency_key, held_due_at) WHERE (held IS NOT NULL);

-- INDEX: job_runs_default_tenant_id_job_scheduled_at_idx
CREATE UNIQUE INDEX job_runs_default_tenant_id_job_scheduled_at_idx ON job_runs_default USING btree (tenant_id, job, scheduled_at) WHERE (origin = 'cron'::text);

-- INDEX: job_runs_tenant_list
CREATE INDEX job_runs_tenant_list ON ONLY job_runs USING btree (tenant_id, scheduled_at DESC, id DESC);

-- INDEX: job_runs_default_tenant_id_scheduled_at_id_idx
CREATE INDEX job_runs_default_tenant_id_scheduled_at_id_idx ON job_runs_default USING btree (tenant_id, scheduled_at DESC, id DESC);

-- INDEX ATTACH: job_runs_default_held_tenant_id_job_concurrency_key_held_du_idx
ALTER INDEX job_runs_held ATTACH PARTITION job_runs_default_held_tenant_id_job_concurrency_key_held_du_idx;

-- INDEX ATTACH: job_runs_default_pkey
ALTER INDEX job_runs_pkey ATTACH PARTITION job_runs_default_pkey;

-- INDEX ATTACH: job_runs_default_tenant_id_job_scheduled_at_idx
ALTER INDEX job_runs_cron_occurrence ATTACH PARTITION job_runs_default_tenant_id_job_scheduled_at_idx;

-- INDEX ATTACH: job_runs_default_tenant_id_scheduled_at_id_idx
ALTER INDEX job_runs_tenant_list ATTACH PARTITION job_runs_default_tenant_id_scheduled_at_id_idx;

-- FUNCTION: scheduler_append_attempt(jsonb, integer, integer, bigint, text, timestamp with time zone, text, text, integer)
CREATE FUNCTION scheduler_append_attempt(attempts jsonb, max_attempts integer, attempt integer, epoch bigint, worker text, started_at timestamp with time zone, outcome text, error text, http_status integer) RETURNS jsonb
    LANGUAGE sql STABLE
    AS $$
    SELECT CASE WHEN jsonb_array_length(attempts) < max_attempts THEN attempts
                ELSE COALESCE((SELECT jsonb_agg(t.e ORDER BY t.i)
                               FROM jsonb_array_elements(attempts) WITH ORDINALITY AS t(e, i)
                               WHERE t.i > jsonb_array_length(attempts) - (max_attempts - 1)), '[]') END
        || jsonb_build_array(jsonb_build_object(
               'attempt', attempt, 'epoch', epoch, 'worker', worker, 'started_at', started_at,
               'finished_at', now(), 'outcome', outcome, 'error', error, 'http_status', http_status,
               'duration_ms', round(extract(epoch FROM now() - started_at) * 1000)))
$$;

-- FUNCTION: scheduler_counts_failures(integer)
CREATE FUNCTION scheduler_counts_failures(pause_after_failures integer) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $_$
    SELECT CASE WHEN $1 IS NOT NULL THEN true END
$_$;

-- FUNCTION: scheduler_failure_streak()
CREATE FUNCTION scheduler_failure_streak() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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

-- FUNCTION: scheduler_start_deadline(integer, timestamp with time zone)
CREATE FUNCTION scheduler_start_deadline(attempt integer, expires_at timestamp with time zone) RETURNS timestamp with time zone
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $_$
    SELECT CASE WHEN $1 = 0 THEN $2 END
$_$;

-- TRIGGER: job_runs job_runs_failure_streak
CREATE TRIGGER job_runs_failure_streak AFTER UPDATE ON job_runs FOR EACH ROW WHEN ((old.counts_failures AND (new.status = ANY (ARRAY['succeeded'::text, 'failed'::text])) AND (old.status <> new.status))) EXECUTE FUNCTION scheduler_failure_streak();
