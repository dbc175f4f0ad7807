"""Unique and debounced runs: a job may allow one run per key (`unique`) or fold a key's submissions
into one pending run (`debounce`).

job_runs is partitioned by day, so no unique index on it can span days; a key is a row of
dedupe_keys instead, keyed (tenant_id, job, key), naming the run that holds it. A submission
claims its runs' keys (claim_dedupe_keys: INSERT … ON CONFLICT, exact under any concurrency, however
many API processes) and inserts the runs that got theirs, in one transaction; insert_runs refuses a
run of a job with a rule that comes without its claimed key. A key held by another run is taken over
when its window is over, or when the submitter found its holder ended, under the row lock the
ON CONFLICT took on it. A job without a rule pays two null tests per run in insert_runs.

Nothing that moves a run (the claim, a start, an outcome, the reaper, a cancel) touches this table:
whether a key's holder is still live, or still pending for a debounce, is read from the run itself
by the submitter that finds the key taken, while it holds the key's row lock. So the claim and the
outcomes pay nothing, and no transition ever waits for a key. Rows whose holder has ended (or whose
window is over) are deleted by the engine's sweep (app/engine/dedupe.py).

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-05
"""

from app.db.migrations import run_script

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

UPGRADE = r"""
-- {"key": "payload.a.b" | null, "within_seconds": n | null} and
-- {"key": "payload.a.b" | null, "period_seconds": p, "max_delay_seconds": m}; null: no rule.
ALTER TABLE jobs ADD COLUMN "unique" jsonb, ADD COLUMN debounce jsonb;
-- The key the run holds (or held); null for a job with neither rule. Metadata only: no rewrite.
ALTER TABLE job_runs ADD COLUMN dedupe_key text;

CREATE TABLE dedupe_keys (
    tenant_id        text NOT NULL,
    job              text NOT NULL,
    key              text NOT NULL,
    run_id           uuid NOT NULL,
    run_scheduled_at timestamptz NOT NULL,  -- the holder's partition
    -- unique with within_seconds: the key is free from then on, whatever its run does.
    window_ends_at   timestamptz,
    -- debounce: the run is due no later than this (its first submission + max_delay_seconds).
    latest_due_at    timestamptz,
    PRIMARY KEY (tenant_id, job, key)
);

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
"""

DOWNGRADE = r"""
DROP FUNCTION scheduler_dedupe_key(jsonb, jsonb);
DROP TABLE dedupe_keys;
ALTER TABLE job_runs DROP COLUMN dedupe_key;
ALTER TABLE jobs DROP COLUMN "unique", DROP COLUMN debounce;
"""


def upgrade() -> None:
    run_script(UPGRADE)


def downgrade() -> None:
    run_script(DOWNGRADE)
