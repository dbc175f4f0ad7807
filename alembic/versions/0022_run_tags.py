"""Tags and metadata: a run carries `tags` (its job's default tags and its own) and `metadata` (a JSON
object); the listing and bulk actions find runs by tag through `run_tags`, one row per run and tag.

The columns are nullable with no default: a run without tags or metadata stores two null bits, and
adding them is a catalog change on any history.

A GIN index on job_runs.tags finds a tag's runs but not in the listing's order: a page fetches and
sorts every run of the tag in every day (a bitmap scan per partition, then a sort), or walks the
tenant's listing index filtering on the tag, so its cost grows with the tag's history (measured on
1.2 million runs over 8 days: 41 ms for a page of a tag on 1,000 of them). `run_tags` is keyed like
the listing, (tenant_id, tag, scheduled_at, run_id): read backwards from the cursor, a page is an
index range of one tag, each entry joined to its run by the run's key, and stops at the page's end
(1.1 ms for that page; 1 ms for a tag on 600,000 runs, first page or 300,000 deep).

It is partitioned like job_runs, by day of scheduled_at with a DEFAULT, so a day's tags go with its
runs in one metadata operation, never a DELETE: partition maintenance makes a day of run_tags for
every day of job_runs (moving the day's rows stranded in DEFAULT, as for runs) and drops it once the
runs' day has been retired, each in a transaction of its own (listings and inserts take both
tables; DDL holding one while it waited for the other could deadlock with them). A statement
trigger writes it as tagged runs are inserted; a run's tags never change.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-05
"""

from app.db.migrations import run_script

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

UPGRADE = r"""
ALTER TABLE jobs ADD COLUMN tags text[];
ALTER TABLE job_runs ADD COLUMN tags text[], ADD COLUMN metadata jsonb;

CREATE TABLE run_tags (
    tenant_id     text NOT NULL,
    tag           text NOT NULL,
    scheduled_at  timestamptz NOT NULL,  -- the run's partition key, and the listing's order
    run_id        uuid NOT NULL,
    PRIMARY KEY (tenant_id, tag, scheduled_at, run_id)
) PARTITION BY RANGE (scheduled_at);
CREATE TABLE run_tags_default PARTITION OF run_tags DEFAULT;

-- A run's tags: its job's, then those of its own the job does not name, in the order given (each
-- list is already free of repeats); NULL when there are none. Called only for a run that brings
-- tags of its own (a run without takes its job's as they are). In plpgsql, of simple expressions: a
-- query per call (a SQL function's subquery, which the planner also tries to inline at every plan of
-- insert_runs) made a batch of 1000 runs with 3 tags each 2.8 times as slow as one without; this
-- way, 1.6 times (measured alternated on one database).
CREATE FUNCTION scheduler_run_tags(job_tags text[], own text[]) RETURNS text[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    tags text[] := COALESCE(job_tags, '{}');
    tag  text;
BEGIN
    FOREACH tag IN ARRAY COALESCE(own, '{}') LOOP
        IF tag <> ALL(tags) THEN
            tags := tags || tag;
        END IF;
    END LOOP;
    RETURN NULLIF(tags, '{}');
END
$$;

-- Every run inserted with tags gets its rows in run_tags, by whichever statement inserts it
-- (insert_runs, insert_cron_runs), in one insert per statement: a row trigger (one insert per run)
-- made a batch of 1000 runs with 3 tags each 1.96 times as slow as one without, this 1.55 times.
-- Untagged, it is one call per statement that writes nothing: 0.009 ms for one run, 0.13 ms for a
-- batch of 1000 (measured on Postgres 15). A statement on one partition fires no statement trigger of
-- the parent: partition maintenance's moves out of DEFAULT leave run_tags as it is.
CREATE FUNCTION scheduler_record_tags() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO run_tags (tenant_id, tag, scheduled_at, run_id)
    SELECT a.tenant_id, t.tag, a.scheduled_at, a.id
    FROM added a CROSS JOIN LATERAL unnest(a.tags) AS t(tag)
    WHERE a.tags IS NOT NULL;
    RETURN NULL;
END
$$;
CREATE TRIGGER job_runs_record_tags AFTER INSERT ON job_runs REFERENCING NEW TABLE AS added
FOR EACH STATEMENT EXECUTE FUNCTION scheduler_record_tags();

-- Of the tags a listing asks for (every one), the one whose runs it reads, keeping those that carry
-- the rest: the tag on the fewest of the tenant's runs, counted up to 10,000 each (ties: the first
-- given). So beside a tag on fewer than 10,000 runs, a page reads at most that many, however common
-- the others. Only the tags' own index is counted: a range or a cursor narrows what is read, never
-- which tag is fewer overall. One tag is simply itself: no count, no query (as a SQL function, its
-- body was planned at every listing, 0.6 ms).
CREATE FUNCTION scheduler_lead_tag(tenant text, tags text[]) RETURNS text
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
BEGIN
    IF cardinality(tags) = 1 THEN
        RETURN tags[1];
    END IF;
    RETURN (SELECT g.tag FROM unnest(tags) WITH ORDINALITY AS g(tag, n)
            ORDER BY (SELECT count(*) FROM (SELECT 1 FROM run_tags c
                                            WHERE c.tenant_id = tenant AND c.tag = g.tag
                                            LIMIT 10000) AS counted),
                     g.n
            LIMIT 1);
END
$$;

-- One UTC day's partition of `parent` (job_runs or run_tags), named like scheduler_partition_name.
-- 0002's way: a standalone table is ATTACHed, which takes the parent only SHARE UPDATE EXCLUSIVE;
-- rows of the day stranded in DEFAULT are moved into it first, under the parent's exclusive lock.
-- Returns 'exists', 'created' or 'created, moved N'.
CREATE FUNCTION scheduler_attach_day_partition(parent text, day date, storage text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    part     text := parent || '_p' || to_char(day, 'YYYYMMDD');
    lo       timestamptz := day::timestamp AT TIME ZONE 'UTC';
    hi       timestamptz := (day + 1)::timestamp AT TIME ZONE 'UTC';
    stranded boolean;
    moved    bigint := 0;
BEGIN
    IF to_regclass(part) IS NOT NULL THEN
        RETURN 'exists';
    END IF;
    EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS) %s', part, parent, storage);
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I WHERE scheduled_at >= %L AND scheduled_at < %L)',
                   parent || '_default', lo, hi) INTO stranded;
    IF stranded THEN
        -- ONLY: LOCK TABLE on a partitioned table would lock every partition as well.
        EXECUTE format('LOCK TABLE ONLY %I IN ACCESS EXCLUSIVE MODE', parent);
        EXECUTE format(
            'WITH stranded AS (DELETE FROM %I WHERE scheduled_at >= %L AND scheduled_at < %L RETURNING *)'
            ' INSERT INTO %I SELECT * FROM stranded', parent || '_default', lo, hi, part);
        GET DIAGNOSTICS moved = ROW_COUNT;
    END IF;
    -- The partition's indexes are built here, matching the parent's (on an empty or small table).
    EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', parent, part, lo, hi);
    IF moved > 0 THEN
        RETURN 'created, moved ' || moved;
    END IF;
    RETURN 'created';
END
$$;

-- 0017's day of job_runs, by the body it now shares with run_tags: fillfactor 50 leaves room for a
-- run's updates to stay on its page.
CREATE OR REPLACE FUNCTION scheduler_create_day_partition(day date) RETURNS text
LANGUAGE sql AS $$
    SELECT scheduler_attach_day_partition('job_runs', day, 'WITH (fillfactor = 50)')
$$;

-- A day of run_tags (insert-only: its pages are packed). Maintenance makes one for every day of
-- job_runs, in a transaction of its own: statements take both tables, in either order (a listing by
-- tag reads run_tags, then its runs; an insert writes runs, then their tags), and DDL that held one
-- while it waited for the other could deadlock with them.
CREATE FUNCTION scheduler_create_tags_day_partition(day date) RETURNS text
LANGUAGE sql AS $$
    SELECT scheduler_attach_day_partition('run_tags', day, '')
$$;

-- A day of run_tags goes once its runs' day has gone (scheduler_retire_day_partition decides that),
-- again in a transaction of its own. Returns 'absent' or 'dropped'.
CREATE FUNCTION scheduler_drop_tags_day_partition(day date) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    part text := 'run_tags_p' || to_char(day, 'YYYYMMDD');
BEGIN
    IF to_regclass(part) IS NULL THEN
        RETURN 'absent';
    END IF;
    IF to_regclass(scheduler_partition_name(day)) IS NOT NULL THEN
        RAISE EXCEPTION 'the runs of % are still there', day;
    END IF;
    EXECUTE format('ALTER TABLE run_tags DETACH PARTITION %I', part);
    EXECUTE format('DROP TABLE %I', part);
    RETURN 'dropped';
END
$$;

-- The days that exist get their tags' day.
SELECT scheduler_create_tags_day_partition(to_date(substr(c.relname, 11), 'YYYYMMDD'))
FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
WHERE i.inhparent = 'job_runs'::regclass AND c.relname LIKE 'job_runs_p%';
"""

# 0017's day of job_runs, verbatim.
DOWNGRADE = r"""
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
    EXECUTE format('CREATE TABLE %I (LIKE job_runs INCLUDING DEFAULTS INCLUDING CONSTRAINTS)'
                   ' WITH (fillfactor = 50)', part);
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

DROP FUNCTION scheduler_drop_tags_day_partition(date);
DROP FUNCTION scheduler_create_tags_day_partition(date);
DROP FUNCTION scheduler_attach_day_partition(text, date, text);
DROP TRIGGER job_runs_record_tags ON job_runs;
DROP FUNCTION scheduler_record_tags();
DROP FUNCTION scheduler_lead_tag(text, text[]);
DROP FUNCTION scheduler_run_tags(text[], text[]);
DROP TABLE run_tags;
ALTER TABLE job_runs DROP COLUMN tags, DROP COLUMN metadata;
ALTER TABLE jobs DROP COLUMN tags;
"""


def upgrade() -> None:
    run_script(UPGRADE)


def downgrade() -> None:
    run_script(DOWNGRADE)
