-- TABLE: concurrency_holders
CREATE TABLE concurrency_holders (
    run_id uuid NOT NULL,
    tenant_id text NOT NULL,
    job text NOT NULL,
    key text NOT NULL
);

-- TABLE: concurrency_slots
CREATE TABLE concurrency_slots (
    tenant_id text NOT NULL,
    job text NOT NULL,
    key text NOT NULL,
    next_at timestamp with time zone
);

-- TABLE: rate_limit_starts
CREATE TABLE rate_limit_starts (
    run_id uuid NOT NULL,
    tenant_id text NOT NULL,
    job text NOT NULL,
    key text NOT NULL,
    granted_at timestamp with time zone NOT NULL,
    started_at timestamp with time zone
);

-- CONSTRAINT: concurrency_holders concurrency_holders_pkey
ALTER TABLE ONLY concurrency_holders
    ADD CONSTRAINT concurrency_holders_pkey PRIMARY KEY (run_id, job);

-- CONSTRAINT: concurrency_slots concurrency_slots_pkey
ALTER TABLE ONLY concurrency_slots
    ADD CONSTRAINT concurrency_slots_pkey PRIMARY KEY (tenant_id, job, key);

-- CONSTRAINT: rate_limit_starts rate_limit_starts_pkey
ALTER TABLE ONLY rate_limit_starts
    ADD CONSTRAINT rate_limit_starts_pkey PRIMARY KEY (run_id, granted_at);

-- INDEX: concurrency_holders_key
CREATE INDEX concurrency_holders_key ON concurrency_holders USING btree (tenant_id, job, key);

-- INDEX: rate_limit_starts_key
CREATE INDEX rate_limit_starts_key ON rate_limit_starts USING btree (tenant_id, job, key, started_at);

-- FUNCTION: scheduler_concurrency_key(jsonb, jsonb)
CREATE FUNCTION scheduler_concurrency_key(concurrency jsonb, payload jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT CASE WHEN concurrency IS NULL THEN NULL
                WHEN length(v) > 200 THEN 'md5:' || md5(v) ELSE v END
    FROM (SELECT COALESCE(
            payload #>> string_to_array(substr(concurrency->>'key', length('payload.') + 1), '.'),
            '') AS v) AS k
$$;

-- FUNCTION: scheduler_flow_control()
CREATE FUNCTION scheduler_flow_control() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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

-- FUNCTION: scheduler_flow_hold_reason(jsonb)
CREATE FUNCTION scheduler_flow_hold_reason(rate_limit jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $_$
    SELECT CASE WHEN $1 IS NOT NULL THEN 'rate_limit' ELSE 'concurrency' END
$_$;

-- FUNCTION: scheduler_job_in_flight(text, text)
CREATE FUNCTION scheduler_job_in_flight(tenant_id text, job text) RETURNS bigint
    LANGUAGE sql STABLE
    AS $_$
    SELECT count(*) FROM concurrency_holders h WHERE h.tenant_id = $1 AND h.job = $2
$_$;

-- FUNCTION: scheduler_run_hold(boolean, integer, boolean, jsonb, jsonb, jsonb, timestamp with time zone)
CREATE FUNCTION scheduler_run_hold(tenant_paused boolean, tenant_max_in_flight integer, job_paused boolean, concurrency jsonb, rate_limit jsonb, payload jsonb, due timestamp with time zone) RETURNS TABLE(held text, held_due_at timestamp with time zone, due_at timestamp with time zone, concurrency_key text)
    LANGUAGE sql IMMUTABLE
    AS $_$
    SELECT h.held,
           CASE WHEN h.held IS NOT NULL THEN $7 END,
           CASE WHEN h.held IS NOT NULL THEN 'infinity'::timestamptz ELSE $7 END,
           CASE WHEN $2 IS NOT NULL THEN COALESCE(scheduler_concurrency_key(COALESCE($4, $5), $6), '')
                ELSE scheduler_concurrency_key(COALESCE($4, $5), $6) END
    FROM (SELECT CASE WHEN $3 OR $1 THEN 'paused'
                      WHEN $4 IS NOT NULL OR $5 IS NOT NULL THEN scheduler_flow_hold_reason($5)
                      WHEN $2 IS NOT NULL THEN 'concurrency' END AS held) AS h
$_$;

-- FUNCTION: scheduler_tenant_flow(text)
CREATE FUNCTION scheduler_tenant_flow(tenant_id text) RETURNS TABLE(paused boolean, max_in_flight integer, paused_jobs text[])
    LANGUAGE plpgsql ROWS 1
    AS $_$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(scheduler_tenant_flow_key($1));
    -- The paused jobs from jobs_paused (migration 0012): none on the default path.
    RETURN QUERY SELECT t.paused, t.max_in_flight,
                        ARRAY(SELECT j.name FROM jobs j WHERE j.tenant_id = $1 AND j.paused)
                 FROM tenants t WHERE t.id = $1;
END
$_$;

-- FUNCTION: scheduler_tenant_flow_key(text)
CREATE FUNCTION scheduler_tenant_flow_key(tenant_id text) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $_$
    SELECT hashtextextended('scheduler.tenant_flow:' || $1, 0)
$_$;

-- FUNCTION: scheduler_tenant_in_flight(text)
CREATE FUNCTION scheduler_tenant_in_flight(tenant_id text) RETURNS bigint
    LANGUAGE sql STABLE
    AS $_$
    SELECT count(*) FROM concurrency_holders h WHERE h.tenant_id = $1 AND h.job = '' AND h.key = ''
$_$;

-- FUNCTION: scheduler_tenant_room(text, integer, text[])
CREATE FUNCTION scheduler_tenant_room(tenant_id text, max_in_flight integer, locked text[]) RETURNS bigint
    LANGUAGE sql STABLE
    AS $_$
    SELECT CASE WHEN $2 IS NULL THEN NULL
                WHEN NOT $1 = ANY($3) THEN 0
                ELSE greatest(0, $2 - scheduler_tenant_in_flight($1)) END
$_$;

-- TRIGGER: job_runs job_runs_flow_control
CREATE TRIGGER job_runs_flow_control BEFORE UPDATE ON job_runs FOR EACH ROW WHEN (((old.concurrency_key IS NOT NULL) OR (old.held IS NOT NULL) OR ((new.status = 'pending'::text) AND (old.status <> 'pending'::text)))) EXECUTE FUNCTION scheduler_flow_control();
