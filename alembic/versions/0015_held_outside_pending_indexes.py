"""Held runs leave the pending indexes. A held run (paused, waiting for a concurrency slot or a rate
limit's room) is pending with due_at 'infinity', so it sat at the end of its priority in both
indexes the claim walks. A claim that found fewer due runs than a batch walked on through every
held entry of that priority, and the per-tenant probe of a tenant whose runs are all held read them
all: on a quiet host, 100,000 runs of a paused job beside 5,000 due ones cost the claim 1.53x its p50
and the unlimited drain 0.71x (docs/bench.md verdict 21). With `held IS NULL` in the predicates the
claim never sees them; what must count them (admission, pausing) reads job_runs_held instead.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-02
"""

from app.db.migrations import run_script

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

UPGRADE = r"""
DROP INDEX job_runs_pending_due;
DROP INDEX job_runs_pending_tenant_due;
CREATE INDEX job_runs_pending_due ON job_runs (priority, due_at) WHERE status = 'pending' AND held IS NULL;
CREATE INDEX job_runs_pending_tenant_due ON job_runs (tenant_id, priority, due_at)
    WHERE status = 'pending' AND held IS NULL;
"""

DOWNGRADE = r"""
DROP INDEX job_runs_pending_due;
DROP INDEX job_runs_pending_tenant_due;
CREATE INDEX job_runs_pending_due ON job_runs (priority, due_at) WHERE status = 'pending';
CREATE INDEX job_runs_pending_tenant_due ON job_runs (tenant_id, priority, due_at) WHERE status = 'pending';
"""


def upgrade() -> None:
    run_script(UPGRADE)


def downgrade() -> None:
    run_script(DOWNGRADE)
