"""Completion callbacks: a job's or run's `callback`, and the outbox that delivers them.

A run that names a callback gets an outbox row (`run_callbacks`) in the same transaction as its
terminal state, written by a trigger whose WHEN clause admits only runs that have a callback and end
in one of its `on` statuses: every terminal transition (a worker's finish, the reaper, a cancel, a
job's deletion, and any later statement) records the obligation without knowing of it, and a run
without a callback costs one WHEN test per status change, no write.

Retirement keeps a day while one of its runs' callbacks is still to be delivered (bounded by the
callback's retry bound), and deletes the day's finished outbox rows with it. The outbox has no foreign
key to job_runs, so it never holds a lock DETACH waits for.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

from app.db.migrations import run_script

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

UPGRADE = r"""
ALTER TABLE jobs ADD COLUMN callback jsonb;
ALTER TABLE job_runs ADD COLUMN callback jsonb;

CREATE TABLE run_callbacks (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id            uuid NOT NULL,
    run_scheduled_at  timestamptz NOT NULL,  -- the run's partition key: one partition per lookup
    tenant_id         text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    url               text NOT NULL,
    status            text NOT NULL DEFAULT 'pending'
                      CHECK (status IN ('pending', 'delivering', 'delivered', 'failed')),
    attempts          integer NOT NULL DEFAULT 0,
    -- The delivery fence: every claim bumps it, and an outcome is recorded only at the epoch it was
    -- claimed with, so a worker that lost its claim (killed, stalled past the lease) records nothing.
    epoch             bigint NOT NULL DEFAULT 0,
    -- When the next attempt is due; while delivering, when the claim lapses.
    due_at            timestamptz NOT NULL DEFAULT now(),
    lease_owner       text,
    last_error        text,
    created_at        timestamptz NOT NULL DEFAULT now(),
    finished_at       timestamptz
);
-- The deliverers' claim: what is due or whose claim lapsed.
CREATE INDEX run_callbacks_due ON run_callbacks (due_at) WHERE status IN ('pending', 'delivering');
-- A run's delivery state on GET /runs/{id}.
CREATE INDEX run_callbacks_run ON run_callbacks (run_id);
-- Retirement: the callbacks of one day's runs.
CREATE INDEX run_callbacks_day ON run_callbacks (run_scheduled_at);

CREATE FUNCTION scheduler_record_callback() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO run_callbacks (run_id, run_scheduled_at, tenant_id, url)
    VALUES (NEW.id, NEW.scheduled_at, NEW.tenant_id, NEW.callback ->> 'url');
    RETURN NULL;
END
$$;

-- Cloned onto every partition, present and future (ATTACH clones it too).
CREATE TRIGGER job_runs_record_callback AFTER UPDATE OF status ON job_runs
FOR EACH ROW
WHEN (NEW.callback IS NOT NULL AND NEW.status IS DISTINCT FROM OLD.status
      AND NEW.status IN ('succeeded', 'failed', 'cancelled') AND (NEW.callback -> 'on') ? NEW.status)
EXECUTE FUNCTION scheduler_record_callback();

-- 0002's retirement, plus: a day whose runs still owe a callback is kept (its runs are the callbacks'
-- bodies), and the day's finished outbox rows go with it.
CREATE OR REPLACE FUNCTION scheduler_retire_day_partition(day date) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    part    text := scheduler_partition_name(day);
    lo      timestamptz := day::timestamp AT TIME ZONE 'UTC';
    hi      timestamptz := (day + 1)::timestamp AT TIME ZONE 'UTC';
    is_live text := format(
        'SELECT EXISTS (SELECT 1 FROM %I WHERE status IN (''pending'', ''dispatched'', ''running''))'
        ' OR EXISTS (SELECT 1 FROM run_callbacks WHERE run_scheduled_at >= %L AND run_scheduled_at < %L'
        '            AND status IN (''pending'', ''delivering''))', part, lo, hi);
    live    boolean;
BEGIN
    IF to_regclass(part) IS NULL THEN
        RETURN 'absent';
    END IF;
    EXECUTE is_live INTO live;
    IF live THEN
        RETURN 'kept';
    END IF;
    -- Held, no terminal transition can commit (each takes the parent), so no callback can be added.
    LOCK TABLE ONLY job_runs IN ACCESS EXCLUSIVE MODE;
    EXECUTE is_live INTO live;
    IF live THEN
        RETURN 'kept';
    END IF;
    EXECUTE format('ALTER TABLE job_runs DETACH PARTITION %I', part);
    EXECUTE format('DROP TABLE %I', part);
    DELETE FROM run_callbacks WHERE run_scheduled_at >= lo AND run_scheduled_at < hi;
    RETURN 'dropped';
END
$$;
"""

# 0002's retirement, verbatim.
DOWNGRADE = r"""
CREATE OR REPLACE FUNCTION scheduler_retire_day_partition(day date) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    part    text := scheduler_partition_name(day);
    is_live text := format(
        'SELECT EXISTS (SELECT 1 FROM %I WHERE status IN (''pending'', ''dispatched'', ''running''))', part);
    live    boolean;
BEGIN
    IF to_regclass(part) IS NULL THEN
        RETURN 'absent';
    END IF;
    EXECUTE is_live INTO live;
    IF live THEN
        RETURN 'kept';
    END IF;
    LOCK TABLE ONLY job_runs IN ACCESS EXCLUSIVE MODE;
    EXECUTE is_live INTO live;
    IF live THEN
        RETURN 'kept';
    END IF;
    EXECUTE format('ALTER TABLE job_runs DETACH PARTITION %I', part);
    EXECUTE format('DROP TABLE %I', part);
    RETURN 'dropped';
END
$$;
DROP TRIGGER IF EXISTS job_runs_record_callback ON job_runs;
DROP FUNCTION IF EXISTS scheduler_record_callback();
DROP TABLE IF EXISTS run_callbacks;
ALTER TABLE job_runs DROP COLUMN IF EXISTS callback;
ALTER TABLE jobs DROP COLUMN IF EXISTS callback;
"""


def upgrade() -> None:
    run_script(UPGRADE)


def downgrade() -> None:
    run_script(DOWNGRADE)
