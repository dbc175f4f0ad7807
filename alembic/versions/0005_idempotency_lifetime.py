"""Idempotency keys live as long as their runs need them, not 24 hours.

A run may be scheduled a year ahead; its key expired after a day, and the same submission sent
again created a second run of the same work. A key now records its run's scheduled_at (the run's
partition key), so maintenance can ask the run itself: a key is deleted once its floor
(expires_at: the grace period after the submission or after scheduled_at, whichever is later) has
passed and its run has been terminal for the grace period, or once the run is gone with its day.
Existing keys get the scheduled_at their run id carries (its leading 48 bits, in milliseconds).

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from app.db.migrations import run_script

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

UPGRADE = r"""
ALTER TABLE idempotency_keys ADD COLUMN run_scheduled_at timestamptz;
UPDATE idempotency_keys SET run_scheduled_at = to_timestamp(
    ('x' || lpad(substr(replace(run_id::text, '-', ''), 1, 12), 16, '0'))::bit(64)::bigint / 1000.0);
ALTER TABLE idempotency_keys ALTER COLUMN run_scheduled_at SET NOT NULL;
"""

DOWNGRADE = r"""
ALTER TABLE idempotency_keys DROP COLUMN run_scheduled_at;
"""


def upgrade() -> None:
    run_script(UPGRADE)


def downgrade() -> None:
    run_script(DOWNGRADE)
