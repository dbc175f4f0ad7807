"""Initial schema: tenants, keys, jobs, idempotency keys and the day-partitioned job_runs.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from app.db.migrations import run_script

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

UPGRADE = r"""
CREATE TABLE tenants (
    id              text PRIMARY KEY CHECK (id ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    -- Workers sign webhook bodies with it, so it is kept (not hashed); it is shown once at creation.
    signing_secret  text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE api_keys (
    id          uuid PRIMARY KEY,
    tenant_id   text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    salt        bytea NOT NULL,
    hash        bytea NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);
CREATE INDEX api_keys_tenant ON api_keys (tenant_id);

CREATE TABLE jobs (
    tenant_id        text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name             text NOT NULL,
    target           jsonb NOT NULL,
    schedule         text,
    timezone         text NOT NULL DEFAULT 'UTC',
    payload          jsonb NOT NULL DEFAULT '{}',
    max_attempts     integer NOT NULL DEFAULT 3 CHECK (max_attempts BETWEEN 1 AND 100),
    backoff_seconds  double precision NOT NULL DEFAULT 10 CHECK (backoff_seconds >= 0),
    timeout_seconds  double precision NOT NULL DEFAULT 30 CHECK (timeout_seconds > 0),
    misfire          text NOT NULL DEFAULT 'latest' CHECK (misfire IN ('latest', 'all', 'skip')),
    paused           boolean NOT NULL DEFAULT false,
    next_fire_at     timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, name)
);
-- The cron materializer's scan: only scheduled, unpaused jobs, oldest next fire first.
CREATE INDEX jobs_next_fire ON jobs (next_fire_at) WHERE schedule IS NOT NULL AND NOT paused;

CREATE TABLE job_runs (
    id                uuid NOT NULL,
    scheduled_at      timestamptz NOT NULL,
    tenant_id         text NOT NULL,
    job               text NOT NULL,
    origin            text NOT NULL DEFAULT 'api' CHECK (origin IN ('api', 'cron')),
    status            text NOT NULL DEFAULT 'pending'
                      CHECK (status IN ('pending', 'dispatched', 'running', 'succeeded', 'failed', 'cancelled')),
    payload           jsonb NOT NULL DEFAULT '{}',
    -- Snapshot of the job at submission, so a run is self-contained and a job edit never
    -- changes a run already in flight.
    target            jsonb NOT NULL,
    max_attempts      integer NOT NULL,
    backoff_seconds   double precision NOT NULL,
    timeout_seconds   double precision NOT NULL,
    attempt           integer NOT NULL DEFAULT 0,
    epoch             bigint NOT NULL DEFAULT 0,
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
    PRIMARY KEY (id, scheduled_at)
) PARTITION BY RANGE (scheduled_at);

-- No insert ever fails for want of a range; maintenance moves these rows into their day.
CREATE TABLE job_runs_default PARTITION OF job_runs DEFAULT;

-- The claim: due pending runs, oldest first, and per tenant for the capped claim.
CREATE INDEX job_runs_pending_due ON job_runs (due_at) WHERE status = 'pending';
CREATE INDEX job_runs_pending_tenant_due ON job_runs (tenant_id, due_at) WHERE status = 'pending';
-- The reaper: leases that may have lapsed.
CREATE INDEX job_runs_leased ON job_runs (lease_expires_at) WHERE status IN ('dispatched', 'running');
-- The claim floor and retention: where the oldest unfinished run lives.
CREATE INDEX job_runs_live ON job_runs (scheduled_at) WHERE status IN ('pending', 'dispatched', 'running');
-- Listing a tenant's runs newest first, keyset-paginated.
CREATE INDEX job_runs_tenant_list ON job_runs (tenant_id, scheduled_at DESC, id DESC);
-- Cron occurrences are idempotent across engines (the partition key is part of it, so Postgres allows it).
CREATE UNIQUE INDEX job_runs_cron_occurrence ON job_runs (tenant_id, job, scheduled_at) WHERE origin = 'cron';

-- Idempotency keys cannot be unique on a table partitioned by day, so they live here.
CREATE TABLE idempotency_keys (
    tenant_id     text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    key           text NOT NULL,
    run_id        uuid NOT NULL,
    body_hash     text NOT NULL,
    expires_at    timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, key)
);
CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at);

-- A UUID whose leading 48 bits are `ts` in Unix milliseconds (the UUIDv7 layout), so the id alone
-- names the partition. gen_random_uuid() gives the random bits and the variant; byte 6 gets version 7.
CREATE FUNCTION scheduler_run_id(ts timestamptz) RETURNS uuid
LANGUAGE sql VOLATILE PARALLEL SAFE AS $$
    SELECT encode(
        set_byte(
            overlay(r.b PLACING substring(int8send(floor(extract(epoch FROM ts) * 1000)::bigint) FROM 3) FROM 1 FOR 6),
            6, (get_byte(r.b, 6) & 15) | 112),
        'hex')::uuid
    FROM (SELECT uuid_send(gen_random_uuid()) AS b) AS r
$$;

CREATE FUNCTION scheduler_partition_name(day date) RETURNS text
LANGUAGE sql IMMUTABLE AS $$ SELECT 'job_runs_p' || to_char(day, 'YYYYMMDD') $$;

-- Create the partition for one UTC day. Rows that landed in DEFAULT for that day would make
-- CREATE ... PARTITION OF fail, so they are moved: detach DEFAULT, create, copy, re-attach, all in
-- the caller's transaction. Returns 'exists', 'created' or 'created, moved N'.
CREATE FUNCTION scheduler_create_day_partition(day date) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    part  text := scheduler_partition_name(day);
    lo    timestamptz := day::timestamp AT TIME ZONE 'UTC';
    hi    timestamptz := (day + 1)::timestamp AT TIME ZONE 'UTC';
    moved bigint;
BEGIN
    IF to_regclass(part) IS NOT NULL THEN
        RETURN 'exists';
    END IF;
    PERFORM 1 FROM job_runs_default WHERE scheduled_at >= lo AND scheduled_at < hi LIMIT 1;
    IF NOT FOUND THEN
        EXECUTE format('CREATE TABLE %I PARTITION OF job_runs FOR VALUES FROM (%L) TO (%L)', part, lo, hi);
        RETURN 'created';
    END IF;
    ALTER TABLE job_runs DETACH PARTITION job_runs_default;
    EXECUTE format('CREATE TABLE %I PARTITION OF job_runs FOR VALUES FROM (%L) TO (%L)', part, lo, hi);
    EXECUTE format('INSERT INTO %I SELECT * FROM job_runs_default WHERE scheduled_at >= %L AND scheduled_at < %L',
                   part, lo, hi);
    GET DIAGNOSTICS moved = ROW_COUNT;
    DELETE FROM job_runs_default WHERE scheduled_at >= lo AND scheduled_at < hi;
    ALTER TABLE job_runs ATTACH PARTITION job_runs_default DEFAULT;
    RETURN 'created, moved ' || moved;
END
$$;

-- Age out one day: DETACH + DROP, one metadata operation, never a DELETE scan; and only when
-- every run in it is terminal. Returns 'absent', 'kept' (it still holds unfinished runs) or 'dropped'.
CREATE FUNCTION scheduler_retire_day_partition(day date) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    part text := scheduler_partition_name(day);
    live boolean;
BEGIN
    IF to_regclass(part) IS NULL THEN
        RETURN 'absent';
    END IF;
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I WHERE status IN (''pending'', ''dispatched'', ''running''))', part)
        INTO live;
    IF live THEN
        RETURN 'kept';
    END IF;
    EXECUTE format('ALTER TABLE job_runs DETACH PARTITION %I', part);
    EXECUTE format('DROP TABLE %I', part);
    RETURN 'dropped';
END
$$;
"""

DOWNGRADE = r"""
DROP FUNCTION IF EXISTS scheduler_retire_day_partition(date);
DROP FUNCTION IF EXISTS scheduler_create_day_partition(date);
DROP FUNCTION IF EXISTS scheduler_partition_name(date);
DROP FUNCTION IF EXISTS scheduler_run_id(timestamptz);
DROP TABLE IF EXISTS idempotency_keys;
DROP TABLE IF EXISTS job_runs;
DROP TABLE IF EXISTS jobs;
DROP TABLE IF EXISTS api_keys;
DROP TABLE IF EXISTS tenants;
"""


def upgrade() -> None:
    run_script(UPGRADE)


def downgrade() -> None:
    run_script(DOWNGRADE)
