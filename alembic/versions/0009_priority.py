"""Priority: a job's default (0-9, 0 most urgent, 5 by default; Oban's convention), copied onto
each run and overridable per submitted run. The claim takes due runs by (priority, due_at), so the
two partial indexes it reads get priority in their key: the claim stays an index walk that stops
after one batch, never a sort of the whole due set. Adding a column with a constant default is a
catalog change (no table rewrite), so this is cheap on a large history; the indexes are rebuilt.

Revision ID: 0009
Revises: 0005
Create Date: 2026-12-01
"""

from app.db.migrations import run_script

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

UPGRADE = r"""
ALTER TABLE jobs ADD COLUMN priority smallint NOT NULL DEFAULT 5
    CONSTRAINT jobs_priority_range CHECK (priority BETWEEN 0 AND 9);
-- No CHECK on job_runs: adding one scans every partition of the history; the API bounds the value.
ALTER TABLE job_runs ADD COLUMN priority smallint NOT NULL DEFAULT 5;
DROP INDEX job_runs_pending_due;
DROP INDEX job_runs_pending_tenant_due;
CREATE INDEX job_runs_pending_due ON job_runs (priority, due_at) WHERE status = 'pending';
CREATE INDEX job_runs_pending_tenant_due ON job_runs (tenant_id, priority, due_at) WHERE status = 'pending';
"""

DOWNGRADE = r"""
DROP INDEX job_runs_pending_due;
DROP INDEX job_runs_pending_tenant_due;
ALTER TABLE job_runs DROP COLUMN priority;
ALTER TABLE jobs DROP COLUMN priority;
CREATE INDEX job_runs_pending_due ON job_runs (due_at) WHERE status = 'pending';
CREATE INDEX job_runs_pending_tenant_due ON job_runs (tenant_id, due_at) WHERE status = 'pending';
"""


def upgrade() -> None:
    run_script(UPGRADE)


def downgrade() -> None:
    run_script(DOWNGRADE)
