-- FUNCTION: scheduler_analyze_stale_partitions(bigint, integer)
CREATE FUNCTION scheduler_analyze_stale_partitions(min_changes bigint, max_count integer) RETURNS SETOF text
    LANGUAGE plpgsql
    AS $$
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

-- FUNCTION: scheduler_attach_day_partition(text, date, text)
CREATE FUNCTION scheduler_attach_day_partition(parent text, day date, storage text) RETURNS text
    LANGUAGE plpgsql
    AS $$
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

-- FUNCTION: scheduler_create_day_partition(date)
CREATE FUNCTION scheduler_create_day_partition(day date) RETURNS text
    LANGUAGE sql
    AS $$
    SELECT scheduler_attach_day_partition('job_runs', day, 'WITH (fillfactor = 50)')
$$;

-- FUNCTION: scheduler_create_tags_day_partition(date)
CREATE FUNCTION scheduler_create_tags_day_partition(day date) RETURNS text
    LANGUAGE sql
    AS $$
    SELECT scheduler_attach_day_partition('run_tags', day, '')
$$;

-- FUNCTION: scheduler_drop_tags_day_partition(date)
CREATE FUNCTION scheduler_drop_tags_day_partition(day date) RETURNS text
    LANGUAGE plpgsql
    AS $$
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

-- FUNCTION: scheduler_partition_name(date)
CREATE FUNCTION scheduler_partition_name(day date) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT 'job_runs_p' || to_char(day, 'YYYYMMDD') $$;

-- FUNCTION: scheduler_retire_day_partition(date)
CREATE FUNCTION scheduler_retire_day_partition(day date) RETURNS text
    LANGUAGE plpgsql
    AS $$
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
