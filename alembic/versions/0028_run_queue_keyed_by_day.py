"""run_queue's primary key leads with scheduled_at, (scheduled_at, id), and run_queue_floor goes.

The claim floor (the oldest unfinished run's scheduled_at) and retention read min(scheduled_at)
from run_queue; keyed (id, scheduled_at), that needed an index of its own on scheduled_at, and every
version of a queue row (its insert and each transition but the last) added an entry to both. Keyed
(scheduled_at, id), the key answers the floor, and every lookup of a queue row names both columns.

Revision ID: 0028
Revises: 0027
Create Date: 2026-12-04
"""

from app.db.migrations import run_script

revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None

UPGRADE = r"""
ALTER TABLE run_queue DROP CONSTRAINT run_queue_pkey, ADD PRIMARY KEY (scheduled_at, id);
DROP INDEX run_queue_floor;
"""

DOWNGRADE = r"""
CREATE INDEX run_queue_floor ON run_queue (scheduled_at);
ALTER TABLE run_queue DROP CONSTRAINT run_queue_pkey, ADD PRIMARY KEY (id, scheduled_at);
"""


def upgrade() -> None:
    run_script(UPGRADE)


def downgrade() -> None:
    run_script(DOWNGRADE)
