"""Paused scopes found without a scan: the flow keeper asks "what is paused?" every pass
(paused_scopes in app/db/flow.sql), and on the default path the answer is nothing. Partial indexes hold
only the paused rows, so the question costs one empty index read however many jobs and tenants
there are.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02
"""

from app.db.migrations import run_script

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

UPGRADE = r"""
CREATE INDEX jobs_paused ON jobs (tenant_id, name) WHERE paused;
CREATE INDEX tenants_paused ON tenants (id) WHERE paused;
"""

DOWNGRADE = r"""
DROP INDEX tenants_paused;
DROP INDEX jobs_paused;
"""


def upgrade() -> None:
    run_script(UPGRADE)


def downgrade() -> None:
    run_script(DOWNGRADE)
