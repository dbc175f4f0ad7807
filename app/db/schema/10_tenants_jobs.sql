-- Tenants, their API keys and dashboard sessions, jobs, and idempotency keys.

CREATE TABLE tenants (
    id                       text PRIMARY KEY CHECK (id ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    -- `whsec_` + base64 of the HMAC key (Standard Webhooks). Workers sign webhook bodies with it,
    -- so it is kept, not hashed; it is shown once, at creation or rotation.
    signing_secret           text NOT NULL,
    created_at               timestamptz NOT NULL DEFAULT now(),
    -- A rotation's previous secret, valid until previous_expires_at: webhooks then carry a
    -- signature under each.
    previous_signing_secret  text,
    previous_expires_at      timestamptz,
    -- Flow control: a paused tenant's runs are held 'paused'; max_in_flight caps its runs holding a
    -- slot (dispatched or running) at once. Null: no cap.
    paused                   boolean NOT NULL DEFAULT false,
    max_in_flight            integer CHECK (max_in_flight >= 1)
);
-- Resume and the keeper ask "which tenants are paused?": only those rows, so on the default path the
-- answer is one empty index read.
CREATE INDEX tenants_paused ON tenants (id) WHERE paused;

CREATE TABLE api_keys (
    id          uuid PRIMARY KEY,
    tenant_id   text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    salt        bytea NOT NULL,
    hash        bytea NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz,
    -- What the key may do (app/api/scopes.py); every scope by default, so a key made without any
    -- (by a release before scopes) keeps all it could do.
    scopes      text[] NOT NULL
                DEFAULT ARRAY['runs:read', 'runs:write', 'jobs:read', 'jobs:write', 'tenant:admin']
                CHECK (cardinality(scopes) > 0)
);
CREATE INDEX api_keys_tenant ON api_keys (tenant_id);

CREATE TABLE jobs (
    tenant_id             text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name                  text NOT NULL,
    target                jsonb NOT NULL,
    schedule              text,
    timezone              text NOT NULL DEFAULT 'UTC',
    payload               jsonb NOT NULL DEFAULT '{}',
    max_attempts          integer NOT NULL DEFAULT 3 CHECK (max_attempts BETWEEN 1 AND 100),
    backoff_seconds       double precision NOT NULL DEFAULT 10 CHECK (backoff_seconds >= 0),
    timeout_seconds       double precision NOT NULL DEFAULT 30 CHECK (timeout_seconds > 0),
    misfire               text NOT NULL DEFAULT 'latest' CHECK (misfire IN ('latest', 'all', 'skip')),
    paused                boolean NOT NULL DEFAULT false,
    next_fire_at          timestamptz,
    created_at            timestamptz NOT NULL DEFAULT now(),
    updated_at            timestamptz NOT NULL DEFAULT now(),
    callback              jsonb,
    priority              smallint NOT NULL DEFAULT 5 CONSTRAINT jobs_priority_range CHECK (priority BETWEEN 0 AND 9),
    -- {"limit": n, "key": "payload.a.b" | null}; null: no limit.
    concurrency           jsonb,
    -- {"limit": n, "period_seconds": p, "key": "payload.a.b" | null}; null: no limit.
    rate_limit            jsonb,
    -- A job's default deadline for its runs: this long after each run's scheduled_at (null: none).
    -- The API takes the same bounds (app/api/schemas/jobs.py).
    expire_after_seconds  double precision CHECK (expire_after_seconds >= 1 AND expire_after_seconds <= 2678400),
    overlap               text NOT NULL DEFAULT 'allow' CHECK (overlap IN ('allow', 'skip', 'buffer_one')),
    jitter_seconds        integer NOT NULL DEFAULT 0 CHECK (jitter_seconds BETWEEN 0 AND 3600),
    -- After this many failures in a row the job pauses itself (paused_reason 'failures'); its runs
    -- carry counts_failures, and job_runs_failure_streak counts their ends.
    pause_after_failures  integer CHECK (pause_after_failures BETWEEN 1 AND 1000),
    consecutive_failures  integer NOT NULL DEFAULT 0,
    paused_reason         text CHECK (paused_reason IN ('requested', 'failures')),
    -- {"key": "payload.a.b" | null, "within_seconds": n | null} and
    -- {"key": "payload.a.b" | null, "period_seconds": p, "max_delay_seconds": m}; null: no rule.
    "unique"              jsonb,
    debounce              jsonb,
    tags                  text[],
    -- The events whose POST /tenants/{t}/events/{name} submits one run of this job.
    on_events             text[],
    PRIMARY KEY (tenant_id, name)
);
-- An event's subscribers: only jobs that subscribe to any are in it.
CREATE INDEX jobs_on_events ON jobs USING gin (on_events) WHERE on_events IS NOT NULL;
-- The cron materializer's scan: only scheduled, unpaused jobs, oldest next fire first.
CREATE INDEX jobs_next_fire ON jobs (next_fire_at) WHERE schedule IS NOT NULL AND NOT paused;
-- A tenant's paused jobs (scheduler_tenant_flow, the keeper): none on the default path.
CREATE INDEX jobs_paused ON jobs (tenant_id, name) WHERE paused;

-- Idempotency keys cannot be unique on a table partitioned by day, so they live here.
-- run_scheduled_at is the day of the key's run (its partition key): the run is read by id within its day.
CREATE TABLE idempotency_keys (
    tenant_id         text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    key               text NOT NULL,
    run_id            uuid NOT NULL,
    body_hash         text NOT NULL,
    expires_at        timestamptz NOT NULL,
    run_scheduled_at  timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, key)
);
CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at);

-- Dashboard sessions and one-time login links, by the hash of their token.
CREATE TABLE ui_sessions (
    token_hash  bytea PRIMARY KEY,
    kind        text NOT NULL CHECK (kind IN ('session', 'link')),
    -- NULL and NULL: the admin (every tenant).
    tenant_id   text REFERENCES tenants (id) ON DELETE CASCADE,
    key_id      uuid REFERENCES api_keys (id) ON DELETE CASCADE,
    csrf_token  text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    CHECK ((tenant_id IS NULL) = (key_id IS NULL))
);
CREATE INDEX ui_sessions_expiry ON ui_sessions (expires_at);
