-- TABLE: api_keys
CREATE TABLE api_keys (
    id uuid NOT NULL,
    tenant_id text NOT NULL,
    salt bytea NOT NULL,
    hash bytea NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    revoked_at timestamp with time zone
);

-- TABLE: idempotency_keys
CREATE TABLE idempotency_keys (
    tenant_id text NOT NULL,
    key text NOT NULL,
    run_id uuid NOT NULL,
    body_hash text NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    run_scheduled_at timestamp with time zone NOT NULL
);

-- TABLE: jobs
CREATE TABLE jobs (
    tenant_id text NOT NULL,
    name text NOT NULL,
    target jsonb NOT NULL,
    schedule text,
    timezone text DEFAULT 'UTC'::text NOT NULL,
    payload jsonb DEFAULT '{}'::jsonb NOT NULL,
    max_attempts integer DEFAULT 3 NOT NULL,
    backoff_seconds double precision DEFAULT 10 NOT NULL,
    timeout_seconds double precision DEFAULT 30 NOT NULL,
    misfire text DEFAULT 'latest'::text NOT NULL,
    paused boolean DEFAULT false NOT NULL,
    next_fire_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    callback jsonb,
    priority smallint DEFAULT 5 NOT NULL,
    concurrency jsonb,
    rate_limit jsonb,
    expire_after_seconds double precision,
    overlap text DEFAULT 'allow'::text NOT NULL,
    jitter_seconds integer DEFAULT 0 NOT NULL,
    pause_after_failures integer,
    consecutive_failures integer DEFAULT 0 NOT NULL,
    paused_reason text,
    "unique" jsonb,
    debounce jsonb,
    tags text[],
    CONSTRAINT jobs_backoff_seconds_check CHECK ((backoff_seconds >= (0)::double precision)),
    CONSTRAINT jobs_expire_after_seconds_check CHECK (((expire_after_seconds >= (1)::double precision) AND (expire_after_seconds <= (2678400)::double precision))),
    CONSTRAINT jobs_jitter_seconds_check CHECK (((jitter_seconds >= 0) AND (jitter_seconds <= 3600))),
    CONSTRAINT jobs_max_attempts_check CHECK (((max_attempts >= 1) AND (max_attempts <= 100))),
    CONSTRAINT jobs_misfire_check CHECK ((misfire = ANY (ARRAY['latest'::text, 'all'::text, 'skip'::text]))),
    CONSTRAINT jobs_overlap_check CHECK ((overlap = ANY (ARRAY['allow'::text, 'skip'::text, 'buffer_one'::text]))),
    CONSTRAINT jobs_pause_after_failures_check CHECK (((pause_after_failures >= 1) AND (pause_after_failures <= 1000))),
    CONSTRAINT jobs_paused_reason_check CHECK ((paused_reason = ANY (ARRAY['requested'::text, 'failures'::text]))),
    CONSTRAINT jobs_priority_range CHECK (((priority >= 0) AND (priority <= 9))),
    CONSTRAINT jobs_timeout_seconds_check CHECK ((timeout_seconds > (0)::double precision))
);

-- TABLE: tenants
CREATE TABLE tenants (
    id text NOT NULL,
    signing_secret text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    previous_signing_secret text,
    previous_expires_at timestamp with time zone,
    paused boolean DEFAULT false NOT NULL,
    max_in_flight integer,
    CONSTRAINT tenants_id_check CHECK ((id ~ '^[a-z0-9][a-z0-9_-]{0,62}$'::text)),
    CONSTRAINT tenants_max_in_flight_check CHECK ((max_in_flight >= 1))
);

-- TABLE: ui_sessions
CREATE TABLE ui_sessions (
    token_hash bytea NOT NULL,
    kind text NOT NULL,
    tenant_id text,
    key_id uuid,
    csrf_token text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    CONSTRAINT ui_sessions_check CHECK (((tenant_id IS NULL) = (key_id IS NULL))),
    CONSTRAINT ui_sessions_kind_check CHECK ((kind = ANY (ARRAY['session'::text, 'link'::text])))
);

-- CONSTRAINT: api_keys api_keys_pkey
ALTER TABLE ONLY api_keys
    ADD CONSTRAINT api_keys_pkey PRIMARY KEY (id);

-- CONSTRAINT: idempotency_keys idempotency_keys_pkey
ALTER TABLE ONLY idempotency_keys
    ADD CONSTRAINT idempotency_keys_pkey PRIMARY KEY (tenant_id, key);

-- CONSTRAINT: jobs jobs_pkey
ALTER TABLE ONLY jobs
    ADD CONSTRAINT jobs_pkey PRIMARY KEY (tenant_id, name);

-- CONSTRAINT: tenants tenants_pkey
ALTER TABLE ONLY tenants
    ADD CONSTRAINT tenants_pkey PRIMARY KEY (id);

-- CONSTRAINT: ui_sessions ui_sessions_pkey
ALTER TABLE ONLY ui_sessions
    ADD CONSTRAINT ui_sessions_pkey PRIMARY KEY (token_hash);

-- FK CONSTRAINT: api_keys api_keys_tenant_id_fkey
ALTER TABLE ONLY api_keys
    ADD CONSTRAINT api_keys_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants(id) ON DELETE CASCADE;

-- FK CONSTRAINT: idempotency_keys idempotency_keys_tenant_id_fkey
ALTER TABLE ONLY idempotency_keys
    ADD CONSTRAINT idempotency_keys_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants(id) ON DELETE CASCADE;

-- FK CONSTRAINT: jobs jobs_tenant_id_fkey
ALTER TABLE ONLY jobs
    ADD CONSTRAINT jobs_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants(id) ON DELETE CASCADE;

-- FK CONSTRAINT: ui_sessions ui_sessions_key_id_fkey
ALTER TABLE ONLY ui_sessions
    ADD CONSTRAINT ui_sessions_key_id_fkey FOREIGN KEY (key_id) REFERENCES api_keys(id) ON DELETE CASCADE;

-- FK CONSTRAINT: ui_sessions ui_sessions_tenant_id_fkey
ALTER TABLE ONLY ui_sessions
    ADD CONSTRAINT ui_sessions_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants(id) ON DELETE CASCADE;

-- INDEX: api_keys_tenant
CREATE INDEX api_keys_tenant ON api_keys USING btree (tenant_id);

-- INDEX: idempotency_keys_expiry
CREATE INDEX idempotency_keys_expiry ON idempotency_keys USING btree (expires_at);

-- INDEX: jobs_next_fire
CREATE INDEX jobs_next_fire ON jobs USING btree (next_fire_at) WHERE ((schedule IS NOT NULL) AND (NOT paused));

-- INDEX: jobs_paused
CREATE INDEX jobs_paused ON jobs USING btree (tenant_id, name) WHERE paused;

-- INDEX: tenants_paused
CREATE INDEX tenants_paused ON tenants USING btree (id) WHERE paused;

-- INDEX: ui_sessions_expiry
CREATE INDEX ui_sessions_expiry ON ui_sessions USING btree (expires_at);
