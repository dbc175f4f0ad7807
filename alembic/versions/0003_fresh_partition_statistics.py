"""Statistics that keep up with the runs: ANALYZE a partition once enough of it has changed.

Autovacuum analyzes a table once a minute at best (autovacuum_naptime). In between, a day's
partition that fills with pending runs still has the statistics of when it held few: the planner
then believes the pending set is tiny and reads it whole and sorts it, per claim, instead of taking
its oldest rows off the index. The claim's cost grows with the backlog, the backlog with the claim's
cost: the `steady` bench at 3,000 runs/s fell 72 s behind and stayed there until autovacuum came
round (a claim of 100 runs: 93 ms with stale statistics, 6 ms fresh, measured with EXPLAIN ANALYZE).

scheduler_analyze_stale_partitions analyzes the partitions of job_runs that changed by at least
`min_changes` rows since their last ANALYZE, most changed first; one engine at a time (a transaction
advisory lock: the others return at once), under a short lock_timeout.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from app.db.migrations import run_script

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

UPGRADE = r"""
CREATE FUNCTION scheduler_analyze_stale_partitions(min_changes bigint, max_count int)
RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    part regclass;
BEGIN
    IF NOT pg_try_advisory_xact_lock(1935892801) THEN  -- another engine is at it
        RETURN;
    END IF;
    PERFORM set_config('lock_timeout', '1s', true);
    FOR part IN
        SELECT s.relid::regclass
        FROM pg_stat_user_tables s JOIN pg_inherits i ON i.inhrelid = s.relid
        WHERE i.inhparent = 'job_runs'::regclass AND s.n_mod_since_analyze >= min_changes
        ORDER BY s.n_mod_since_analyze DESC
        LIMIT max_count
    LOOP
        EXECUTE format('ANALYZE %s', part);
        RETURN NEXT part::text;
    END LOOP;
END
$$;
"""

DOWNGRADE = r"""
DROP FUNCTION scheduler_analyze_stale_partitions(bigint, int);
"""


def upgrade() -> None:
    run_script(UPGRADE)


def downgrade() -> None:
    run_script(DOWNGRADE)
