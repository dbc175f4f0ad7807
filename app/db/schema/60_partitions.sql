-- Day partitions of job_runs and run_tags: made ahead by the engine's partition maintenance, retired
-- when every run of the day has ended, and kept analyzed. A partition is named after its UTC day
-- (job_runs_pYYYYMMDD, run_tags_pYYYYMMDD).
--
-- DDL beside the claims: a day is made as a standalone table and ATTACHed, which takes the parent
-- only SHARE UPDATE EXCLUSIVE (no claim, insert or read conflicts with it) and DEFAULT ACCESS
-- EXCLUSIVE, which claims never wait for because they prune DEFAULT at plan time. Statements take
-- job_runs and run_tags in either order (a listing by tag reads run_tags, then its runs; an insert
-- writes runs, then their tags), so maintenance changes one of them per transaction: DDL that held
-- one while it waited for the other could deadlock with them.

CREATE FUNCTION scheduler_partition_name(day date) RETURNS text
LANGUAGE sql IMMUTABLE AS $$ SELECT 'job_runs_p' || to_char(day, 'YYYYMMDD') $$;

-- One UTC day's partition of `parent` (job_runs or run_tags), named like scheduler_partition_name,
-- with `storage` (its WITH clause). A concurrent insert that routed a row of this very day to DEFAULT
-- on the old partition list fails cleanly (partition constraint) rather than landing in the wrong
-- place. Rows of the day stranded in DEFAULT are moved into the table before it is attached, under
-- the parent's exclusive lock: rows change partition, and no session may plan against the old
-- partition list and then read DEFAULT after they have left it.
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

-- A day of job_runs: fillfactor 50 leaves room for a run's updates to stay on its page (HOT).
CREATE FUNCTION scheduler_create_day_partition(day date) RETURNS text
LANGUAGE sql AS $$
    SELECT scheduler_attach_day_partition('job_runs', day, 'WITH (fillfactor = 50)')
$$;

-- A day of run_tags (insert-only: its pages are packed). Maintenance makes one for every day of
-- job_runs, in a transaction of its own.
CREATE FUNCTION scheduler_create_tags_day_partition(day date) RETURNS text
LANGUAGE sql AS $$
    SELECT scheduler_attach_day_partition('run_tags', day, '')
$$;

-- Age out one day of job_runs: DETACH + DROP, one metadata operation, never a DELETE scan; and only
-- when every run in it is terminal and owes no callback (its runs are the callbacks' bodies); the
-- day's finished outbox rows go with it. The first look takes no lock anyone waits for, so a day
-- that is kept costs claims nothing. DETACH needs the parent ACCESS EXCLUSIVE (CONCURRENTLY is
-- impossible beside a DEFAULT partition); once that is held nothing can write to the day, and a
-- second look decides. Returns 'absent', 'kept' (it still holds unfinished runs) or 'dropped'.
CREATE FUNCTION scheduler_retire_day_partition(day date) RETURNS text
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

-- Statistics that keep up with the runs: ANALYZE the partitions of job_runs that changed by at
-- least `min_changes` rows since their last ANALYZE, most changed first. Autovacuum comes round a
-- minute apart at best; a day that fills with pending runs meanwhile would keep the statistics of
-- when it held few, and the claim would read the pending set whole instead of its oldest rows off
-- the index. One engine at a time (a transaction advisory lock: the others return at once), under
-- a short lock_timeout.
CREATE FUNCTION scheduler_analyze_stale_partitions(min_changes bigint, max_count integer)
RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    part regclass;
BEGIN
    IF NOT pg_try_advisory_xact_lock(1935892801) THEN  -- another engine is at it
        RETURN;
    END IF;
    PERFORM set_config('lock_timeout', '1s', true);
    FOR part IN
        SELECT s.relid::regclass
        FROM pg_stat_user_tables s JOIN pg_inherits i ON i.inhrelid = s.relid
        WHERE i.inhparent = 'job_runs'::regclass AND s.n_mod_since_analyze >= min_changes
        ORDER BY s.n_mod_since_analyze DESC
        LIMIT max_count
    LOOP
        EXECUTE format('ANALYZE %s', part);
        RETURN NEXT part::text;
    END LOOP;
END
$$;
