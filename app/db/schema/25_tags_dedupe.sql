-- TABLE: dedupe_keys
CREATE TABLE dedupe_keys (
    tenant_id text NOT NULL,
    job text NOT NULL,
    key text NOT NULL,
    run_id uuid NOT NULL,
    run_scheduled_at timestamp with time zone NOT NULL,
    window_ends_at timestamp with time zone,
    latest_due_at timestamp with time zone
);

-- TABLE: run_tags
CREATE TABLE run_tags (
    tenant_id text NOT NULL,
    tag text NOT NULL,
    scheduled_at timestamp with time zone NOT NULL,
    run_id uuid NOT NULL
)
PARTITION BY RANGE (scheduled_at);

-- TABLE: run_tags_default
CREATE TABLE run_tags_default (
    tenant_id text NOT NULL,
    tag text NOT NULL,
    scheduled_at timestamp with time zone NOT NULL,
    run_id uuid NOT NULL
);

-- TABLE ATTACH: run_tags_default
ALTER TABLE ONLY run_tags ATTACH PARTITION run_tags_default DEFAULT;

-- CONSTRAINT: dedupe_keys dedupe_keys_pkey
ALTER TABLE ONLY dedupe_keys
    ADD CONSTRAINT dedupe_keys_pkey PRIMARY KEY (tenant_id, job, key);

-- CONSTRAINT: run_tags run_tags_pkey
ALTER TABLE ONLY run_tags
    ADD CONSTRAINT run_tags_pkey PRIMARY KEY (tenant_id, tag, scheduled_at, run_id);

-- CONSTRAINT: run_tags_default run_tags_default_pkey
ALTER TABLE ONLY run_tags_default
    ADD CONSTRAINT run_tags_default_pkey PRIMARY KEY (tenant_id, tag, scheduled_at, run_id);

-- INDEX ATTACH: run_tags_default_pkey
ALTER INDEX run_tags_pkey ATTACH PARTITION run_tags_default_pkey;

-- FUNCTION: scheduler_dedupe_key(jsonb, jsonb)
CREATE FUNCTION scheduler_dedupe_key(rule jsonb, payload jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT CASE WHEN rule IS NULL THEN NULL
                WHEN rule->>'key' IS NULL THEN ''
                WHEN length(v) > 200 THEN 'sha256:' || encode(sha256(convert_to(v, 'UTF8')), 'hex')
                ELSE v END
    FROM (SELECT CAST(COALESCE(payload #> string_to_array(substr(rule->>'key', length('payload.') + 1), '.'),
                               'null') AS text) AS v) AS k
$$;

-- FUNCTION: scheduler_lead_tag(text, text[])
CREATE FUNCTION scheduler_lead_tag(tenant text, tags text[]) RETURNS text
    LANGUAGE plpgsql STABLE PARALLEL SAFE
    AS $$
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

-- FUNCTION: scheduler_record_tags()
CREATE FUNCTION scheduler_record_tags() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    INSERT INTO run_tags (tenant_id, tag, scheduled_at, run_id)
    SELECT a.tenant_id, t.tag, a.scheduled_at, a.id
    FROM added a CROSS JOIN LATERAL unnest(a.tags) AS t(tag)
    WHERE a.tags IS NOT NULL;
    RETURN NULL;
END
$$;

-- FUNCTION: scheduler_run_tags(text[], text[])
CREATE FUNCTION scheduler_run_tags(job_tags text[], own text[]) RETURNS text[]
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $$
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

-- TRIGGER: job_runs job_runs_record_tags
CREATE TRIGGER job_runs_record_tags AFTER INSERT ON job_runs REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION scheduler_record_tags();
