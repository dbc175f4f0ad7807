"""Partition DDL that does not stop claims, and retirement that cannot drop a run written meanwhile.

scheduler_create_day_partition used CREATE TABLE ... PARTITION OF, which takes the parent ACCESS
EXCLUSIVE: it waited for every open claim transaction (claims hold the parent ROW EXCLUSIVE however
well they prune) and, while it waited, queued every later claim behind it. It now creates a standalone
table and ATTACHes it, which takes the parent only SHARE UPDATE EXCLUSIVE.

scheduler_retire_day_partition looked for unfinished runs, then DETACHed: a run committed between the
look and the DETACH's lock was dropped with the day. It now looks again once the parent is its own.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from app.db.migrations import run_script

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

UPGRADE = r"""
-- Create the partition for one UTC day. A standalone table is ATTACHed: that takes the parent SHARE
-- UPDATE EXCLUSIVE, which no claim, insert or read conflicts with, and DEFAULT ACCESS EXCLUSIVE (to
-- check it holds no row of the day), which claims never wait for because they prune DEFAULT at plan
-- time (DESIGN §2). A concurrent insert that routed a row of this very day to DEFAULT on the old
-- partition list fails cleanly (partition constraint) rather than landing in the wrong place.
-- Rows of the day that landed in DEFAULT are moved into the table before it is attached. That path
-- takes the parent exclusively: rows change partition, and no session may plan against the old
-- partition list and then read DEFAULT after they have left it. Returns 'exists', 'created' or
-- 'created, moved N'.
CREATE OR REPLACE FUNCTION scheduler_create_day_partition(day date) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    part  text := scheduler_partition_name(day);
    lo    timestamptz := day::timestamp AT TIME ZONE 'UTC';
    hi    timestamptz := (day + 1)::timestamp AT TIME ZONE 'UTC';
    moved bigint := 0;
BEGIN
    IF to_regclass(part) IS NOT NULL THEN
        RETURN 'exists';
    END IF;
    EXECUTE format('CREATE TABLE %I (LIKE job_runs INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', part);
    PERFORM 1 FROM job_runs_default WHERE scheduled_at >= lo AND scheduled_at < hi LIMIT 1;
    IF FOUND THEN
        -- ONLY: LOCK TABLE on a partitioned table would lock every partition as well.
        LOCK TABLE ONLY job_runs IN ACCESS EXCLUSIVE MODE;
        EXECUTE format(
            'WITH stranded AS (DELETE FROM job_runs_default WHERE scheduled_at >= %L AND scheduled_at < %L RETURNING *)'
            ' INSERT INTO %I SELECT * FROM stranded', lo, hi, part);
        GET DIAGNOSTICS moved = ROW_COUNT;
    END IF;
    -- The partition's indexes are built here, matching the parent's (on an empty or small table).
    EXECUTE format('ALTER TABLE job_runs ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', part, lo, hi);
    IF moved > 0 THEN
        RETURN 'created, moved ' || moved;
    END IF;
    RETURN 'created';
END
$$;

-- Age out one day: DETACH + DROP, one metadata operation, never a DELETE scan; and only when every
-- run in it is terminal. The first look takes no lock anyone waits for, so a day that is kept costs
-- claims nothing. DETACH needs the parent ACCESS EXCLUSIVE (CONCURRENTLY is impossible beside a
-- DEFAULT partition); once that is held nothing can write to the day, and a second look decides.
-- Returns 'absent', 'kept' (it still holds unfinished runs) or 'dropped'.
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
"""

# 0001's definitions, verbatim.
DOWNGRADE = r"""
CREATE OR REPLACE FUNCTION scheduler_create_day_partition(day date) RETURNS text
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

CREATE OR REPLACE FUNCTION scheduler_retire_day_partition(day date) RETURNS text
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


def upgrade() -> None:
    run_script(UPGRADE)


def downgrade() -> None:
    run_script(DOWNGRADE)
