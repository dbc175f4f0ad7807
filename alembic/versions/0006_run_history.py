"""A run's attempt history and its result, on the run row itself.

`attempts` is a bounded jsonb array (at most max_attempts entries) appended by the statements that
already write the run: the worker's start, its finish, and the reaper. A separate history table
would cost one more row write per attempt, and the noop and python drains are bound by writes.
`result` is what the target returned (a handler's JSON value, a webhook's body), bounded by
SCHEDULER_MAX_RESULT_BYTES in the worker; `result_truncated` says it was cut.

Adding columns with constant defaults is a metadata change (no table rewrite), also on every
partition of job_runs.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from alembic import op
from sqlalchemy.util import await_only

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

UPGRADE = r"""
ALTER TABLE job_runs ADD COLUMN attempts jsonb NOT NULL DEFAULT '[]'::jsonb;
ALTER TABLE job_runs ADD COLUMN result jsonb;
ALTER TABLE job_runs ADD COLUMN result_truncated boolean NOT NULL DEFAULT false;

-- Closes the open attempt (the last entry, appended by start_runs) with its outcome. One definition
-- for the worker's finish and the reaper. An array left empty by a run started before this
-- migration gets the entry it lacked (jsonb_set puts an out-of-range -1 at the front).
CREATE FUNCTION scheduler_close_attempt(attempts jsonb, attempt integer, epoch bigint,
                                        started_at timestamptz, outcome text, error text,
                                        http_status integer) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_set(attempts, '{-1}',
        COALESCE(attempts -> -1, jsonb_build_object('attempt', attempt, 'epoch', epoch,
                                                    'started_at', started_at))
        || jsonb_build_object('finished_at', now(), 'outcome', outcome, 'error', error,
                              'http_status', http_status,
                              'duration_ms', round(extract(epoch FROM now() - started_at) * 1000)))
$$;
"""

DOWNGRADE = r"""
DROP FUNCTION scheduler_close_attempt(jsonb, integer, bigint, timestamptz, text, text, integer);
ALTER TABLE job_runs DROP COLUMN result_truncated;
ALTER TABLE job_runs DROP COLUMN result;
ALTER TABLE job_runs DROP COLUMN attempts;
"""


def _script(sql: str) -> None:
    """Run a multi-statement script over the simple query protocol (a prepared statement holds one)."""
    driver = op.get_bind().connection.dbapi_connection.driver_connection
    await_only(driver.execute(sql))


def upgrade() -> None:
    _script(UPGRADE)


def downgrade() -> None:
    _script(DOWNGRADE)
