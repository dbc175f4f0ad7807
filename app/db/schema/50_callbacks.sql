-- TABLE: run_callbacks
CREATE TABLE run_callbacks (
    id bigint NOT NULL,
    run_id uuid NOT NULL,
    run_scheduled_at timestamp with time zone NOT NULL,
    tenant_id text NOT NULL,
    url text NOT NULL,
    status text DEFAULT 'pending'::text NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    epoch bigint DEFAULT 0 NOT NULL,
    due_at timestamp with time zone DEFAULT now() NOT NULL,
    lease_owner text,
    last_error text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    finished_at timestamp with time zone,
    CONSTRAINT run_callbacks_status_check CHECK ((status = ANY (ARRAY['pending'::text, 'delivering'::text, 'delivered'::text, 'failed'::text])))
);

-- SEQUENCE: run_callbacks_id_seq
ALTER TABLE run_callbacks ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME run_callbacks_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

-- CONSTRAINT: run_callbacks run_callbacks_pkey
ALTER TABLE ONLY run_callbacks
    ADD CONSTRAINT run_callbacks_pkey PRIMARY KEY (id);

-- FK CONSTRAINT: run_callbacks run_callbacks_tenant_id_fkey
ALTER TABLE ONLY run_callbacks
    ADD CONSTRAINT run_callbacks_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants(id) ON DELETE CASCADE;

-- INDEX: run_callbacks_day
CREATE INDEX run_callbacks_day ON run_callbacks USING btree (run_scheduled_at);

-- INDEX: run_callbacks_due
CREATE INDEX run_callbacks_due ON run_callbacks USING btree (due_at) WHERE (status = ANY (ARRAY['pending'::text, 'delivering'::text]));

-- INDEX: run_callbacks_run
CREATE INDEX run_callbacks_run ON run_callbacks USING btree (run_id);

-- FUNCTION: scheduler_record_callback()
CREATE FUNCTION scheduler_record_callback() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    INSERT INTO run_callbacks (run_id, run_scheduled_at, tenant_id, url)
    VALUES (NEW.id, NEW.scheduled_at, NEW.tenant_id, NEW.callback ->> 'url');
    RETURN NULL;
END
$$;

-- TRIGGER: job_runs job_runs_record_callback
CREATE TRIGGER job_runs_record_callback AFTER UPDATE OF status ON job_runs FOR EACH ROW WHEN (((new.callback IS NOT NULL) AND (new.status IS DISTINCT FROM old.status) AND (new.status = ANY (ARRAY['succeeded'::text, 'failed'::text, 'cancelled'::text, 'expired'::text])) AND ((new.callback -> 'on'::text) ? new.status))) EXECUTE FUNCTION scheduler_record_callback();
