-- The audit log: one row per change made through the API or the dashboard, written in the change's
-- transaction (app/services/audit.py). Partitioned by day of `at` like the runs' history, kept
-- SCHEDULER_AUDIT_RETENTION_DAYS; insert-only.

CREATE TABLE audit_events (
    tenant_id     text NOT NULL,
    at            timestamptz NOT NULL,
    id            uuid NOT NULL,
    actor_type    text NOT NULL CHECK (actor_type IN ('key', 'admin', 'session')),
    actor_id      text NOT NULL,
    actor_key_id  text,  -- a dashboard session's: the key it signed in with (NULL: the admin token)
    action        text NOT NULL,
    target        text NOT NULL,
    request_id    text NOT NULL,
    detail        jsonb NOT NULL,
    PRIMARY KEY (tenant_id, at, id)
) PARTITION BY RANGE (at);
CREATE INDEX audit_events_by_action ON audit_events (tenant_id, action, at, id);
CREATE TABLE audit_events_default PARTITION OF audit_events DEFAULT;

-- One UTC day of audit_events (insert-only: its pages are packed), attached as
-- scheduler_attach_day_partition (0022) attaches a day of runs, with the day's rows stranded in
-- DEFAULT moved into it first. Returns 'exists', 'created' or 'created, moved N'.
CREATE FUNCTION scheduler_create_audit_day_partition(day date) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    part  text := 'audit_events_p' || to_char(day, 'YYYYMMDD');
    lo    timestamptz := day::timestamp AT TIME ZONE 'UTC';
    hi    timestamptz := (day + 1)::timestamp AT TIME ZONE 'UTC';
    moved bigint := 0;
BEGIN
    IF to_regclass(part) IS NOT NULL THEN
        RETURN 'exists';
    END IF;
    EXECUTE format('CREATE TABLE %I (LIKE audit_events INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', part);
    PERFORM 1 FROM audit_events_default WHERE at >= lo AND at < hi LIMIT 1;
    IF FOUND THEN
        LOCK TABLE ONLY audit_events IN ACCESS EXCLUSIVE MODE;
        EXECUTE format(
            'WITH stranded AS (DELETE FROM audit_events_default WHERE at >= %L AND at < %L RETURNING *)'
            ' INSERT INTO %I SELECT * FROM stranded', lo, hi, part);
        GET DIAGNOSTICS moved = ROW_COUNT;
    END IF;
    EXECUTE format('ALTER TABLE audit_events ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', part, lo, hi);
    IF moved > 0 THEN
        RETURN 'created, moved ' || moved;
    END IF;
    RETURN 'created';
END
$$;

-- A day of audit_events past retention goes whole. Returns 'absent' or 'dropped'.
CREATE FUNCTION scheduler_drop_audit_day_partition(day date) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    part text := 'audit_events_p' || to_char(day, 'YYYYMMDD');
BEGIN
    IF to_regclass(part) IS NULL THEN
        RETURN 'absent';
    END IF;
    EXECUTE format('ALTER TABLE audit_events DETACH PARTITION %I', part);
    EXECUTE format('DROP TABLE %I', part);
    RETURN 'dropped';
END
$$;
