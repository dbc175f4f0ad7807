"""A tenant's max_in_flight (issue 17): at most n of its runs hold an in-flight slot at a time.

Built on the slots of migration 0010: the tenant's slot is the key (tenant_id, '', '') of
concurrency_slots and concurrency_holders (a job name is never empty, so it cannot collide with a
job's key). A run of a limited tenant carries a concurrency_key ('' when its job has no limit of
its own), so the trigger job_runs_flow_control, unchanged, frees all its slots when its attempt
ends, is reaped or is cancelled (fenced as before), and re-holds it when it comes back to pending.
A run of a tenant without max_in_flight keeps concurrency_key NULL: it pays nothing new.

A run holds one row per slot that applies (its job's key, its tenant's), so the holders' key
becomes (run_id, job).

Revision ID: 0013
Revises: 0014 (written beside 0014, which main took first; chained after it so there is one head)
Create Date: 2026-12-02
"""

from app.db.migrations import run_script

revision = "0013"
down_revision = "0014"
branch_labels = None
depends_on = None

UPGRADE = r"""
ALTER TABLE tenants ADD COLUMN max_in_flight integer CHECK (max_in_flight >= 1);
-- The keeper asks "which tenants are limited?" every pass (limited_tenants): only those rows, so on
-- the default path the answer is one empty index read (as 0014 does for paused scopes).
CREATE INDEX tenants_limited ON tenants (id) WHERE max_in_flight IS NOT NULL;

ALTER TABLE concurrency_holders DROP CONSTRAINT concurrency_holders_pkey,
    ADD PRIMARY KEY (run_id, job);

-- A tenant's runs holding its slot now (its "in flight" in the API).
CREATE FUNCTION scheduler_tenant_in_flight(tenant_id text) RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT count(*) FROM concurrency_holders h WHERE h.tenant_id = $1 AND h.job = '' AND h.key = ''
$$;

-- As in 0010, and a run of a tenant with max_in_flight waits for a slot too (its key '' when its
-- job names none). The tenant row was already read for `paused`: no new read.
CREATE OR REPLACE FUNCTION scheduler_run_hold(tenant_id text, job_paused boolean, concurrency jsonb,
                                              payload jsonb, due timestamptz)
RETURNS TABLE (held text, held_due_at timestamptz, due_at timestamptz, concurrency_key text)
LANGUAGE sql STABLE AS $$
    SELECT h.held,
           CASE WHEN h.held IS NOT NULL THEN $5 END,
           CASE WHEN h.held IS NOT NULL THEN 'infinity'::timestamptz ELSE $5 END,
           CASE WHEN h.tenant_limited THEN COALESCE(scheduler_concurrency_key($3, $4), '')
                ELSE scheduler_concurrency_key($3, $4) END
    FROM (SELECT CASE WHEN $2 OR t.paused THEN 'paused'
                      WHEN $3 IS NOT NULL OR t.max_in_flight IS NOT NULL THEN 'concurrency' END AS held,
                 t.max_in_flight IS NOT NULL AS tenant_limited
          FROM (SELECT 1) AS one LEFT JOIN tenants t ON t.id = $1) AS h
$$;
"""

DOWNGRADE = r"""
CREATE OR REPLACE FUNCTION scheduler_run_hold(tenant_id text, job_paused boolean, concurrency jsonb,
                                              payload jsonb, due timestamptz)
RETURNS TABLE (held text, held_due_at timestamptz, due_at timestamptz, concurrency_key text)
LANGUAGE sql STABLE AS $$
    SELECT h.held,
           CASE WHEN h.held IS NOT NULL THEN $5 END,
           CASE WHEN h.held IS NOT NULL THEN 'infinity'::timestamptz ELSE $5 END,
           scheduler_concurrency_key($3, $4)
    FROM (SELECT CASE WHEN $2 OR (SELECT t.paused FROM tenants t WHERE t.id = $1) THEN 'paused'
                      WHEN $3 IS NOT NULL THEN 'concurrency' END AS held) AS h
$$;
DROP FUNCTION scheduler_tenant_in_flight(text);
DELETE FROM concurrency_holders WHERE job = '';
DELETE FROM concurrency_slots WHERE job = '';
ALTER TABLE concurrency_holders DROP CONSTRAINT concurrency_holders_pkey, ADD PRIMARY KEY (run_id);
-- Runs that waited only for their tenant's slot: their job has no limit, so they are due again.
UPDATE job_runs r SET held = NULL, due_at = r.held_due_at, held_due_at = NULL, concurrency_key = NULL
FROM jobs j
WHERE j.tenant_id = r.tenant_id AND j.name = r.job AND j.concurrency IS NULL
  AND r.concurrency_key IS NOT NULL AND r.held = 'concurrency';
UPDATE job_runs r SET concurrency_key = NULL
FROM jobs j
WHERE j.tenant_id = r.tenant_id AND j.name = r.job AND j.concurrency IS NULL AND r.concurrency_key IS NOT NULL;
DROP INDEX tenants_limited;
ALTER TABLE tenants DROP COLUMN max_in_flight;
"""


def upgrade() -> None:
    run_script(UPGRADE)


def downgrade() -> None:
    run_script(DOWNGRADE)
