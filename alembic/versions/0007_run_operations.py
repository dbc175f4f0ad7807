"""Run operations (retry, reschedule, bulk actions): an index of pending runs pulled forward.

A reschedule may move a pending run's due_at before its scheduled_at (the run id, and so its
partition, keeps scheduled_at). The claim prunes partitions by scheduled_at up to the database's
clock, so such a run would never be claimed; the engine reads the latest scheduled_at of these runs
from this index (claim_floor) and raises its claim ceiling to it. The index holds only runs that are
pending *and* due before their scheduled_at, so it stays empty unless runs are pulled forward.

Revision ID: 0007
Revises: 0005
Create Date: 2026-12-01
"""

from app.db.migrations import run_script

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

UPGRADE = r"""
CREATE INDEX job_runs_pulled_forward ON job_runs (scheduled_at)
    WHERE status = 'pending' AND due_at < scheduled_at;
"""

DOWNGRADE = r"""
DROP INDEX job_runs_pulled_forward;
"""


def upgrade() -> None:
    run_script(UPGRADE)


def downgrade() -> None:
    run_script(DOWNGRADE)
