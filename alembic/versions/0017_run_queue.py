"""The queue moves beside the runs: `run_queue` holds one narrow row per live run (pending, held,
dispatched or running) with what the claim, the floor and the reapers look up, so job_runs keeps no
index on anything a transition changes and its updates are HOT.

Every index of job_runs that named `status` in its predicate (pending by priority, pending by tenant,
leased, live, pulled forward) gave each new version of a run an entry in every index, three versions
a noop run and four a python one, none HOT. With those indexes on `run_queue` instead, a run's
transitions rewrite its job_runs row in place on its page (day partitions are now created with
fillfactor 50, the room those updates need) and write a small row of the queue. Priced before it
was built, then measured built (docs/bench.md verdicts 30 and 31).

The queue is kept in step by statement triggers on job_runs (insert, update, delete, truncate), so
every writer keeps it right without knowing it: submissions, cron, claims, starts, outcomes, cancels,
retries, reschedules, holds and grants, tests and operators' own statements. Its rows are hints to
find runs by; every transition still decides on the run's own row (status, epoch, lease). Write runs
through job_runs: a statement on one partition fires no statement trigger of the parent (partition
maintenance moves rows between DEFAULT and their day keeping their keys, which leaves the queue
right).

Lock order: a writer locks its run, then its trigger the run's queue row. The claim finds and locks
queue rows first (SKIP LOCKED, so engines split the work), so it takes the runs with SKIP LOCKED too
and never waits for a writer that may be waiting for it.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-03
"""

from app.db.migrations import run_script

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

UPGRADE = r"""
CREATE TABLE run_queue (
    id               uuid NOT NULL,
    scheduled_at     timestamptz NOT NULL,
    tenant_id        text NOT NULL,
    priority         smallint NOT NULL,
    due_at           timestamptz NOT NULL,
    state            smallint NOT NULL,  -- scheduler_queue_state(): 0 pending, 1 dispatched, 2 running, 3 held
    lease_expires_at timestamptz,
    dispatched_at    timestamptz,
    PRIMARY KEY (id, scheduled_at)
);
CREATE INDEX run_queue_due ON run_queue (priority, due_at) WHERE state = 0;
CREATE INDEX run_queue_tenant_due ON run_queue (tenant_id, priority, due_at) WHERE state = 0;
CREATE INDEX run_queue_leased ON run_queue (lease_expires_at) WHERE state IN (1, 2);
CREATE INDEX run_queue_floor ON run_queue (scheduled_at);
CREATE INDEX run_queue_pulled_forward ON run_queue (scheduled_at) WHERE state IN (0, 3) AND due_at < scheduled_at;

CREATE FUNCTION scheduler_queue_state(status text, held text) RETURNS smallint
LANGUAGE sql IMMUTABLE AS $$
    SELECT CAST(CASE WHEN $1 = 'pending' AND $2 IS NULL THEN 0 WHEN $1 = 'pending' THEN 3
                     WHEN $1 = 'dispatched' THEN 1 WHEN $1 = 'running' THEN 2 END AS smallint)
$$;

CREATE FUNCTION scheduler_queue_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO run_queue (id, scheduled_at, tenant_id, priority, due_at, state, lease_expires_at, dispatched_at)
    SELECT id, scheduled_at, tenant_id, priority, due_at, scheduler_queue_state(status, held),
           lease_expires_at, dispatched_at
    FROM added WHERE status IN ('pending', 'dispatched', 'running');
    RETURN NULL;
END $$;

-- An update that changes nothing the queue holds writes nothing to it.
CREATE FUNCTION scheduler_queue_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM run_queue q USING changed c
    WHERE q.id = c.id AND q.scheduled_at = c.scheduled_at AND c.status NOT IN ('pending', 'dispatched', 'running');
    INSERT INTO run_queue AS q (id, scheduled_at, tenant_id, priority, due_at, state, lease_expires_at, dispatched_at)
    SELECT id, scheduled_at, tenant_id, priority, due_at, scheduler_queue_state(status, held),
           lease_expires_at, dispatched_at
    FROM changed WHERE status IN ('pending', 'dispatched', 'running')
    ON CONFLICT (id, scheduled_at) DO UPDATE
    SET priority = excluded.priority, due_at = excluded.due_at, state = excluded.state,
        lease_expires_at = excluded.lease_expires_at, dispatched_at = excluded.dispatched_at
    WHERE (q.priority, q.due_at, q.state, q.lease_expires_at, q.dispatched_at)
          IS DISTINCT FROM (excluded.priority, excluded.due_at, excluded.state, excluded.lease_expires_at,
                            excluded.dispatched_at);
    RETURN NULL;
END $$;

CREATE FUNCTION scheduler_queue_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM run_queue q USING removed r WHERE q.id = r.id AND q.scheduled_at = r.scheduled_at;
    RETURN NULL;
END $$;

CREATE FUNCTION scheduler_queue_emptied() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE run_queue;
    RETURN NULL;
END $$;

CREATE TRIGGER job_runs_queue_added AFTER INSERT ON job_runs REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION scheduler_queue_added();
CREATE TRIGGER job_runs_queue_changed AFTER UPDATE ON job_runs REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION scheduler_queue_changed();
CREATE TRIGGER job_runs_queue_removed AFTER DELETE ON job_runs REFERENCING OLD TABLE AS removed
    FOR EACH STATEMENT EXECUTE FUNCTION scheduler_queue_removed();
CREATE TRIGGER job_runs_queue_emptied AFTER TRUNCATE ON job_runs
    FOR EACH STATEMENT EXECUTE FUNCTION scheduler_queue_emptied();

INSERT INTO run_queue (id, scheduled_at, tenant_id, priority, due_at, state, lease_expires_at, dispatched_at)
SELECT id, scheduled_at, tenant_id, priority, due_at, scheduler_queue_state(status, held),
       lease_expires_at, dispatched_at
FROM job_runs WHERE status IN ('pending', 'dispatched', 'running');

DROP INDEX job_runs_pending_due, job_runs_pending_tenant_due, job_runs_leased, job_runs_live,
           job_runs_pulled_forward;

-- Room on each page for a run's updates to stay on it (HOT): new days get it when created, the days
-- that exist on the pages they add from now on.
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

DO $$
DECLARE part text;
BEGIN
    FOR part IN SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                WHERE i.inhparent = 'job_runs'::regclass LOOP
        EXECUTE format('ALTER TABLE %I SET (fillfactor = 50)', part);
    END LOOP;
END $$;
"""

DOWNGRADE = r"""
DO $$
DECLARE part text;
BEGIN
    FOR part IN SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                WHERE i.inhparent = 'job_runs'::regclass LOOP
        EXECUTE format('ALTER TABLE %I RESET (fillfactor)', part);
    END LOOP;
END $$;
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

CREATE INDEX job_runs_pending_due ON job_runs (priority, due_at) WHERE status = 'pending' AND held IS NULL;
CREATE INDEX job_runs_pending_tenant_due ON job_runs (tenant_id, priority, due_at)
    WHERE status = 'pending' AND held IS NULL;
CREATE INDEX job_runs_leased ON job_runs (lease_expires_at) WHERE status IN ('dispatched', 'running');
CREATE INDEX job_runs_live ON job_runs (scheduled_at) WHERE status IN ('pending', 'dispatched', 'running');
CREATE INDEX job_runs_pulled_forward ON job_runs (scheduled_at) WHERE status = 'pending' AND due_at < scheduled_at;

DROP TRIGGER job_runs_queue_added ON job_runs;
DROP TRIGGER job_runs_queue_changed ON job_runs;
DROP TRIGGER job_runs_queue_removed ON job_runs;
DROP TRIGGER job_runs_queue_emptied ON job_runs;
DROP FUNCTION scheduler_queue_added(), scheduler_queue_changed(), scheduler_queue_removed(),
              scheduler_queue_emptied(), scheduler_queue_state(text, text);
DROP TABLE run_queue;
"""


def upgrade() -> None:
    run_script(UPGRADE)


def downgrade() -> None:
    run_script(DOWNGRADE)
