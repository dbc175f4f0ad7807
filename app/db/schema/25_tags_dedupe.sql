-- A run's tags (run_tags, the index a listing by tag reads) and the keys of unique and debounced
-- runs (dedupe_keys).

-- One row per tag of a run, partitioned by day like job_runs (60_partitions.sql makes a tags day for
-- every runs day, and drops it after). Written only by job_runs_record_tags.
CREATE TABLE run_tags (
    tenant_id     text NOT NULL,
    tag           text NOT NULL,
    scheduled_at  timestamptz NOT NULL,  -- the run's partition key, and the listing's order
    run_id        uuid NOT NULL,
    PRIMARY KEY (tenant_id, tag, scheduled_at, run_id)
) PARTITION BY RANGE (scheduled_at);
CREATE TABLE run_tags_default PARTITION OF run_tags DEFAULT;

-- The key a unique or debounced job's run holds: one row per (job, key), so a second submission
-- finds the holder by primary key and is refused (unique) or folded into it (debounce).
CREATE TABLE dedupe_keys (
    tenant_id         text NOT NULL,
    job               text NOT NULL,
    key               text NOT NULL,
    run_id            uuid NOT NULL,
    run_scheduled_at  timestamptz NOT NULL,  -- the holder's partition
    -- unique with within_seconds: the key is free from then on, whatever its run does.
    window_ends_at    timestamptz,
    -- debounce: the run is due no later than this (its first submission + max_delay_seconds).
    latest_due_at     timestamptz,
    PRIMARY KEY (tenant_id, job, key)
);


-- A run's tags: its job's, then those of its own the job does not name, in the order given (each
-- list is already free of repeats); NULL when there are none. Called only for a run that brings
-- tags of its own (a run without takes its job's as they are). plpgsql of simple expressions, not a
-- SQL function: a SQL function's subquery is a query per call, and the planner tries to inline it
-- at every plan of insert_runs.
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
-- (insert_runs, insert_cron_runs), in one insert per statement (a row trigger would be one per run).
-- Untagged, it is one call per statement that writes nothing. A statement on one partition fires no
-- statement trigger of the parent: partition maintenance's moves out of DEFAULT leave run_tags as it is.
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
-- which tag is fewer overall. One tag is simply itself: no count, no query (plpgsql, so the body is
-- not planned at every listing).
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

-- A run's key under its job's rule: the JSON text of the payload field the rule names (a payload
-- without it, or with it null, gives 'null': one key for all of those), or '' when the rule names
-- none (one key for the whole job). A value over 200 characters is its SHA-256, so a row stays
-- small; JSON text never starts with "sha256:", so the two never meet.
CREATE FUNCTION scheduler_dedupe_key(rule jsonb, payload jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN rule IS NULL THEN NULL
                WHEN rule->>'key' IS NULL THEN ''
                WHEN length(v) > 200 THEN 'sha256:' || encode(sha256(convert_to(v, 'UTF8')), 'hex')
                ELSE v END
    FROM (SELECT CAST(COALESCE(payload #> string_to_array(substr(rule->>'key', length('payload.') + 1), '.'),
                               'null') AS text) AS v) AS k
$$;
