"""A tenant's max_in_flight (issue 17): at most n of its runs hold an in-flight slot at a time.

Built on the slots of migration 0010: the tenant's slot is the key (tenant_id, '', '') of
concurrency_slots and concurrency_holders (a job name is never empty, so it cannot collide with a
job's key). A run of a limited tenant carries a concurrency_key ('' when its job has no limit of
its own), so the trigger job_runs_flow_control, unchanged, frees all its slots when its attempt
ends, is reaped or is cancelled (fenced as before), and re-holds it when it comes back to pending.
A run of a tenant without max_in_flight keeps concurrency_key NULL: it pays nothing new.

A run holds one row per slot that applies (its job's key, its tenant's), so the holders' key
becomes (run_id, job).

Revision ID: 0014
Revises: 0013 (written as 0013 after 0011; main took 0012 and 0013 meanwhile, so it comes after them)
Create Date: 2026-12-02
"""

from app.db.migrations import run_script

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

UPGRADE = r"""
ALTER TABLE tenants ADD COLUMN max_in_flight integer CHECK (max_in_flight >= 1);
-- The keeper asks "which tenants are limited?" every pass (limited_tenants): only those rows, so on
-- the default path the answer is one empty index read (as 0012 does for paused scopes).
CREATE INDEX tenants_limited ON tenants (id) WHERE max_in_flight IS NOT NULL;

ALTER TABLE concurrency_holders DROP CONSTRAINT concurrency_holders_pkey,
    ADD PRIMARY KEY (run_id, job);

-- A tenant's runs holding its slot now (its "in flight" in the API).
CREATE FUNCTION scheduler_tenant_in_flight(tenant_id text) RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT count(*) FROM concurrency_holders h WHERE h.tenant_id = $1 AND h.job = '' AND h.key = ''
$$;

-- The room a keeper's grant has in a tenant's max_in_flight: NULL when it has none, 0 when the
-- granting transaction does not hold the tenant slot's row (`locked`: the tenants whose row it holds).
CREATE FUNCTION scheduler_tenant_room(tenant_id text, max_in_flight integer, locked text[]) RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN $2 IS NULL THEN NULL
                WHEN NOT $1 = ANY($3) THEN 0
                ELSE greatest(0, $2 - scheduler_tenant_in_flight($1)) END
$$;

-- As in 0013, and a run of a tenant with max_in_flight waits for a slot too (its key '' when its
-- job has no limit of its own). The tenant row was already read for `paused`: no new read.
CREATE OR REPLACE FUNCTION scheduler_run_hold(tenant_id text, job_paused boolean, concurrency jsonb,
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
"""

DOWNGRADE = r"""
CREATE OR REPLACE FUNCTION scheduler_run_hold(tenant_id text, job_paused boolean, concurrency jsonb,
                                              rate_limit jsonb, payload jsonb, due timestamptz)
RETURNS TABLE (held text, held_due_at timestamptz, due_at timestamptz, concurrency_key text)
LANGUAGE sql STABLE AS $$
    SELECT h.held,
           CASE WHEN h.held IS NOT NULL THEN $6 END,
           CASE WHEN h.held IS NOT NULL THEN 'infinity'::timestamptz ELSE $6 END,
           scheduler_concurrency_key(COALESCE($3, $4), $5)
    FROM (SELECT CASE WHEN $2 OR (SELECT t.paused FROM tenants t WHERE t.id = $1) THEN 'paused'
                      WHEN $3 IS NOT NULL OR $4 IS NOT NULL THEN scheduler_flow_hold_reason($4) END AS held) AS h
$$;
DROP FUNCTION scheduler_tenant_room(text, integer, text[]);
DROP FUNCTION scheduler_tenant_in_flight(text);
DELETE FROM concurrency_holders WHERE job = '';
DELETE FROM concurrency_slots WHERE job = '';
ALTER TABLE concurrency_holders DROP CONSTRAINT concurrency_holders_pkey, ADD PRIMARY KEY (run_id);
-- Runs that waited only for their tenant's slot: their job has no limit, so they are due again.
UPDATE job_runs r SET held = NULL, due_at = r.held_due_at, held_due_at = NULL, concurrency_key = NULL
FROM jobs j
WHERE j.tenant_id = r.tenant_id AND j.name = r.job AND j.concurrency IS NULL AND j.rate_limit IS NULL
  AND r.concurrency_key IS NOT NULL AND r.held = 'concurrency';
UPDATE job_runs r SET concurrency_key = NULL
FROM jobs j
WHERE j.tenant_id = r.tenant_id AND j.name = r.job AND j.concurrency IS NULL AND j.rate_limit IS NULL
  AND r.concurrency_key IS NOT NULL;
DROP INDEX tenants_limited;
ALTER TABLE tenants DROP COLUMN max_in_flight;
"""


def upgrade() -> None:
    run_script(UPGRADE)


def downgrade() -> None:
    run_script(DOWNGRADE)
