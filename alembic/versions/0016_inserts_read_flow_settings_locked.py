"""A statement that makes runs pending reads its tenant's flow settings under the tenant's lock.

scheduler_run_hold read the tenant row itself, with the inserting statement's snapshot: a run
inserted in the instant its tenant's max_in_flight was set (or the tenant or its job paused) read
the rows as they were before, and when the PATCH's own hold of the tenant's pending runs ran before
that insert committed, the run escaped both: unheld, keyless, claimable above the limit (or while
paused) until the keeper's next catch-up pass. Now the statements that make runs pending
(insert_runs, insert_cron_runs, retry_runs) read the tenant through scheduler_tenant_flow, which
first takes a shared advisory lock on the tenant, then reads the row with a snapshot of its own (a
volatile function's query does): a change of the tenant's settings or a job's pause takes that lock
exclusively for its transaction (lock_tenant_flow), so it waits for the inserts in flight to commit
and its hold of pending runs sees them, and an insert that comes while it runs waits for its commit
and reads the new settings.

An advisory lock rather than FOR SHARE on the tenant row: share lockers that overlap never leave a
row free, so under a tenant's steady stream of submissions a pause or PATCH waiting for its update
could wait for good; the lock manager queues a waiting exclusive request ahead of later shared ones.

The keeper's catch-up for limited tenants, and the index it read, go (app/engine/keeper.py).

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-02
"""

from app.db.migrations import run_script

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

UPGRADE = r"""
-- The key of a tenant's flow lock (a hash collision between two tenants only serializes them).
CREATE FUNCTION scheduler_tenant_flow_key(tenant_id text) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT hashtextextended('scheduler.tenant_flow:' || $1, 0)
$$;

-- The tenant's pause, max_in_flight and paused jobs as of now, for a statement about to make its
-- runs pending, whose transaction then holds the tenant's flow lock shared until it ends. Volatile,
-- so its query takes its own snapshot after the lock is granted: the calling statement's would
-- predate a change it waited for.
CREATE FUNCTION scheduler_tenant_flow(tenant_id text)
RETURNS TABLE (paused boolean, max_in_flight integer, paused_jobs text[])
LANGUAGE plpgsql VOLATILE ROWS 1 AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(scheduler_tenant_flow_key($1));
    -- The paused jobs from jobs_paused (migration 0012): none on the default path.
    RETURN QUERY SELECT t.paused, t.max_in_flight,
                        ARRAY(SELECT j.name FROM jobs j WHERE j.tenant_id = $1 AND j.paused)
                 FROM tenants t WHERE t.id = $1;
END
$$;

DROP FUNCTION scheduler_run_hold(text, boolean, jsonb, jsonb, jsonb, timestamptz);
-- How a new run starts (insert_runs, insert_cron_runs), from its tenant's settings as
-- scheduler_tenant_flow read them and its job's: held 'paused' when its job or tenant is paused,
-- held for its job's slot or window when the job is limited, held for its tenant's slot when the
-- tenant has a max_in_flight (its key '' when its job has none), else due at `due`.
CREATE FUNCTION scheduler_run_hold(tenant_paused boolean, tenant_max_in_flight integer, job_paused boolean,
                                   concurrency jsonb, rate_limit jsonb, payload jsonb, due timestamptz)
RETURNS TABLE (held text, held_due_at timestamptz, due_at timestamptz, concurrency_key text)
LANGUAGE sql IMMUTABLE AS $$
    SELECT h.held,
           CASE WHEN h.held IS NOT NULL THEN $7 END,
           CASE WHEN h.held IS NOT NULL THEN 'infinity'::timestamptz ELSE $7 END,
           CASE WHEN $2 IS NOT NULL THEN COALESCE(scheduler_concurrency_key(COALESCE($4, $5), $6), '')
                ELSE scheduler_concurrency_key(COALESCE($4, $5), $6) END
    FROM (SELECT CASE WHEN $3 OR $1 THEN 'paused'
                      WHEN $4 IS NOT NULL OR $5 IS NOT NULL THEN scheduler_flow_hold_reason($5)
                      WHEN $2 IS NOT NULL THEN 'concurrency' END AS held) AS h
$$;
DROP INDEX tenants_limited;
"""

DOWNGRADE = r"""
CREATE INDEX tenants_limited ON tenants (id) WHERE max_in_flight IS NOT NULL;
DROP FUNCTION scheduler_run_hold(boolean, integer, boolean, jsonb, jsonb, jsonb, timestamptz);
CREATE FUNCTION scheduler_run_hold(tenant_id text, job_paused boolean, concurrency jsonb,
                                   rate_limit jsonb, payload jsonb, due timestamptz)
RETURNS TABLE (held text, held_due_at timestamptz, due_at timestamptz, concurrency_key text)
LANGUAGE sql STABLE AS $$
    SELECT h.held,
           CASE WHEN h.held IS NOT NULL THEN $6 END,
           CASE WHEN h.held IS NOT NULL THEN 'infinity'::timestamptz ELSE $6 END,
           CASE WHEN h.tenant_limited THEN COALESCE(scheduler_concurrency_key(COALESCE($3, $4), $5), '')
                ELSE scheduler_concurrency_key(COALESCE($3, $4), $5) END
    FROM (SELECT CASE WHEN $2 OR t.paused THEN 'paused'
                      WHEN $3 IS NOT NULL OR $4 IS NOT NULL THEN scheduler_flow_hold_reason($4)
                      WHEN t.max_in_flight IS NOT NULL THEN 'concurrency' END AS held,
                 t.max_in_flight IS NOT NULL AS tenant_limited
          FROM (SELECT 1) AS one LEFT JOIN tenants t ON t.id = $1) AS h
$$;
DROP FUNCTION scheduler_tenant_flow(text);
DROP FUNCTION scheduler_tenant_flow_key(text);
"""


def upgrade() -> None:
    run_script(UPGRADE)


def downgrade() -> None:
    run_script(DOWNGRADE)
