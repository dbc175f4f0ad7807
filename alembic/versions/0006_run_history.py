"""A run's attempt history and its result, on the run row itself.

`attempts` is a bounded jsonb array (at most max_attempts entries) of the attempts that ended
without success (failed, timed out, lost), appended by the statements that already write the run:
the worker's finish and the reaper. The attempt in progress and a successful last attempt are the
run's own columns (attempt, epoch, started_at, finished_at, lease_owner), read as history entries
by app.domain.attempt_history: a separate table, or an append at every start, cost a write or a
third more work on the noop drain's hottest statement (measured: 1.5x the start statement's time).
`result` is what the target returned (a handler's JSON value, a webhook's body), bounded by
SCHEDULER_MAX_RESULT_BYTES in the worker; `result_truncated` says it was cut.

Adding columns with constant defaults is a metadata change (no table rewrite), also on every
partition of job_runs.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from app.db.migrations import run_script

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

UPGRADE = r"""
ALTER TABLE job_runs ADD COLUMN attempts jsonb NOT NULL DEFAULT '[]'::jsonb;
ALTER TABLE job_runs ADD COLUMN result jsonb;
ALTER TABLE job_runs ADD COLUMN result_truncated boolean NOT NULL DEFAULT false;

-- Appends a closed attempt (failed, timed out, lost) to a run's history, keeping the newest
-- max_attempts. One definition for the worker's finish and the reaper.
CREATE FUNCTION scheduler_append_attempt(attempts jsonb, max_attempts integer, attempt integer,
                                         epoch bigint, worker text, started_at timestamptz,
                                         outcome text, error text, http_status integer) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN jsonb_array_length(attempts) < max_attempts THEN attempts
                ELSE COALESCE((SELECT jsonb_agg(t.e ORDER BY t.i)
                               FROM jsonb_array_elements(attempts) WITH ORDINALITY AS t(e, i)
                               WHERE t.i > jsonb_array_length(attempts) - (max_attempts - 1)), '[]') END
        || jsonb_build_array(jsonb_build_object(
               'attempt', attempt, 'epoch', epoch, 'worker', worker, 'started_at', started_at,
               'finished_at', now(), 'outcome', outcome, 'error', error, 'http_status', http_status,
               'duration_ms', round(extract(epoch FROM now() - started_at) * 1000)))
$$;
"""

DOWNGRADE = r"""
DROP FUNCTION scheduler_append_attempt(jsonb, integer, integer, bigint, text, timestamptz, text, text, integer);
ALTER TABLE job_runs DROP COLUMN result_truncated;
ALTER TABLE job_runs DROP COLUMN result;
ALTER TABLE job_runs DROP COLUMN attempts;
"""


def upgrade() -> None:
    run_script(UPGRADE)


def downgrade() -> None:
    run_script(DOWNGRADE)
