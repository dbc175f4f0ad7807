-- TABLE: run_queue
CREATE TABLE run_queue (
    id uuid NOT NULL,
    scheduled_at timestamp with time zone NOT NULL,
    tenant_id text NOT NULL,
    priority smallint NOT NULL,
    due_at timestamp with time zone NOT NULL,
    state smallint NOT NULL,
    lease_expires_at timestamp with time zone,
    dispatched_at timestamp with time zone,
    expires_at timestamp with time zone
);

-- CONSTRAINT: run_queue run_queue_pkey
ALTER TABLE ONLY run_queue
    ADD CONSTRAINT run_queue_pkey PRIMARY KEY (id, scheduled_at);

-- INDEX: run_queue_due
CREATE INDEX run_queue_due ON run_queue USING btree (priority, due_at) WHERE (state = 0);

-- INDEX: run_queue_expiring
CREATE INDEX run_queue_expiring ON run_queue USING btree (expires_at) WHERE (expires_at IS NOT NULL);

-- INDEX: run_queue_floor
CREATE INDEX run_queue_floor ON run_queue USING btree (scheduled_at);

-- INDEX: run_queue_leased
CREATE INDEX run_queue_leased ON run_queue USING btree (lease_expires_at) WHERE (state = ANY (ARRAY[1, 2]));

-- INDEX: run_queue_pulled_forward
CREATE INDEX run_queue_pulled_forward ON run_queue USING btree (scheduled_at) WHERE ((state = ANY (ARRAY[0, 3])) AND (due_at < scheduled_at));

-- INDEX: run_queue_tenant_due
CREATE INDEX run_queue_tenant_due ON run_queue USING btree (tenant_id, priority, due_at) WHERE (state = 0);

-- FUNCTION: scheduler_queue_added()
CREATE FUNCTION scheduler_queue_added() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    INSERT INTO run_queue (id, scheduled_at, tenant_id, priority, due_at, state, lease_expires_at, dispatched_at,
                           expires_at)
    SELECT id, scheduled_at, tenant_id, priority, due_at, scheduler_queue_state(status, held),
           lease_expires_at, dispatched_at, scheduler_start_deadline(attempt, expires_at)
    FROM added WHERE status IN ('pending', 'dispatched', 'running');
    RETURN NULL;
END $$;

-- FUNCTION: scheduler_queue_changed()
CREATE FUNCTION scheduler_queue_changed() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    DELETE FROM run_queue q USING changed c
    WHERE q.id = c.id AND q.scheduled_at = c.scheduled_at AND c.status NOT IN ('pending', 'dispatched', 'running');
    INSERT INTO run_queue AS q (id, scheduled_at, tenant_id, priority, due_at, state, lease_expires_at, dispatched_at,
                                expires_at)
    SELECT id, scheduled_at, tenant_id, priority, due_at, scheduler_queue_state(status, held),
           lease_expires_at, dispatched_at, scheduler_start_deadline(attempt, expires_at)
    FROM changed WHERE status IN ('pending', 'dispatched', 'running')
    ON CONFLICT (id, scheduled_at) DO UPDATE
    SET priority = excluded.priority, due_at = excluded.due_at, state = excluded.state,
        lease_expires_at = excluded.lease_expires_at, dispatched_at = excluded.dispatched_at,
        expires_at = excluded.expires_at
    WHERE (q.priority, q.due_at, q.state, q.lease_expires_at, q.dispatched_at, q.expires_at)
          IS DISTINCT FROM (excluded.priority, excluded.due_at, excluded.state, excluded.lease_expires_at,
                            excluded.dispatched_at, excluded.expires_at);
    RETURN NULL;
END $$;

-- FUNCTION: scheduler_queue_emptied()
CREATE FUNCTION scheduler_queue_emptied() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    TRUNCATE run_queue;
    RETURN NULL;
END $$;

-- FUNCTION: scheduler_queue_removed()
CREATE FUNCTION scheduler_queue_removed() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    DELETE FROM run_queue q USING removed r WHERE q.id = r.id AND q.scheduled_at = r.scheduled_at;
    RETURN NULL;
END $$;

-- FUNCTION: scheduler_queue_state(text, text)
CREATE FUNCTION scheduler_queue_state(status text, held text) RETURNS smallint
    LANGUAGE sql IMMUTABLE
    AS $_$
    SELECT CAST(CASE WHEN $1 = 'pending' AND $2 IS NULL THEN 0 WHEN $1 = 'pending' THEN 3
                     WHEN $1 = 'dispatched' THEN 1 WHEN $1 = 'running' THEN 2 END AS smallint)
$_$;

-- TRIGGER: job_runs job_runs_queue_added
CREATE TRIGGER job_runs_queue_added AFTER INSERT ON job_runs REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION scheduler_queue_added();

-- TRIGGER: job_runs job_runs_queue_changed
CREATE TRIGGER job_runs_queue_changed AFTER UPDATE ON job_runs REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION scheduler_queue_changed();

-- TRIGGER: job_runs job_runs_queue_emptied
CREATE TRIGGER job_runs_queue_emptied AFTER TRUNCATE ON job_runs FOR EACH STATEMENT EXECUTE FUNCTION scheduler_queue_emptied();

-- TRIGGER: job_runs job_runs_queue_removed
CREATE TRIGGER job_runs_queue_removed AFTER DELETE ON job_runs REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION scheduler_queue_removed();
