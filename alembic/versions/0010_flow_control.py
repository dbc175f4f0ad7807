"""Flow control: pause/resume of a job or a tenant, and per-key concurrency limits (issue 17).

A held run stays `pending` but is moved out of the claim's range: its due_at becomes 'infinity'
(the time it would be due is kept in held_due_at, which also orders it), so the claim's partial
index on (due_at) WHERE status = 'pending' never reads it, however many are held. `held` says why:
'paused' (its job or tenant is paused) or 'concurrency' (waiting for a slot of its key).

A concurrency slot is a row in concurrency_holders (one per run holding it). The keeper inserts
them under a row lock on the key's concurrency_slots row, so engines never over-grant; a slot is
freed by the trigger below inside the fenced statement that ends the run's attempt, so it is freed
exactly when (and only if) that transition happens: a stale worker's late finish matches no row and
frees nothing. The trigger fires only for held runs and runs of a limited job: the default path
pays two NULL tests per updated row.

Revision ID: 0010
Revises: 0007
Create Date: 2026-12-01
"""

from app.db.migrations import run_script

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

UPGRADE = r"""
ALTER TABLE tenants ADD COLUMN paused boolean NOT NULL DEFAULT false;
-- {"limit": n, "key": "payload.a.b" | null}; null: no limit.
ALTER TABLE jobs ADD COLUMN concurrency jsonb;
-- Nullable columns without a default: metadata only, no rewrite of any partition.
ALTER TABLE job_runs ADD COLUMN held text, ADD COLUMN held_due_at timestamptz, ADD COLUMN concurrency_key text;

-- The keeper's and resume's reads: held runs by reason, job and key, in the order they were due.
CREATE INDEX job_runs_held ON job_runs (held, tenant_id, job, concurrency_key, held_due_at)
    WHERE held IS NOT NULL;

CREATE TABLE concurrency_slots (
    -- One row per key ever limited: the lock that serializes granting its slots.
    tenant_id text NOT NULL,
    job       text NOT NULL,
    key       text NOT NULL,
    PRIMARY KEY (tenant_id, job, key)
);

CREATE TABLE concurrency_holders (
    run_id    uuid PRIMARY KEY,
    tenant_id text NOT NULL,
    job       text NOT NULL,
    key       text NOT NULL
);
CREATE INDEX concurrency_holders_key ON concurrency_holders (tenant_id, job, key);

-- A job's runs holding a slot now (its "in flight" in the API).
CREATE FUNCTION scheduler_job_in_flight(tenant_id text, job text) RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT count(*) FROM concurrency_holders h WHERE h.tenant_id = $1 AND h.job = $2
$$;

-- The key of a run: the payload field the job's concurrency names ('' when absent), or the job's
-- one key when it names none. Long values are hashed so an index entry stays small.
CREATE FUNCTION scheduler_concurrency_key(concurrency jsonb, payload jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN concurrency IS NULL THEN NULL
                WHEN length(v) > 200 THEN 'md5:' || md5(v) ELSE v END
    FROM (SELECT COALESCE(
            payload #>> string_to_array(substr(concurrency->>'key', length('payload.') + 1), '.'),
            '') AS v) AS k
$$;

-- How a new run starts (insert_runs, insert_cron_runs): held 'paused' when its job or tenant is
-- paused, held 'concurrency' when its job is limited (the keeper grants it a slot), else due as
-- scheduled. One definition for both doors runs come in by.
CREATE FUNCTION scheduler_run_hold(tenant_id text, job_paused boolean, concurrency jsonb, payload jsonb,
                                   due timestamptz)
RETURNS TABLE (held text, held_due_at timestamptz, due_at timestamptz, concurrency_key text)
LANGUAGE sql STABLE AS $$
    SELECT h.held,
           CASE WHEN h.held IS NOT NULL THEN $5 END,
           CASE WHEN h.held IS NOT NULL THEN 'infinity'::timestamptz ELSE $5 END,
           scheduler_concurrency_key($3, $4)
    FROM (SELECT CASE WHEN $2 OR (SELECT t.paused FROM tenants t WHERE t.id = $1) THEN 'paused'
                      WHEN $3 IS NOT NULL THEN 'concurrency' END AS held) AS h
$$;

-- Runs inside every statement that updates a held run or a run of a limited job, so that no
-- transition, present or future (a retry or reschedule of a run, say), can make a held run
-- claimable or leak a slot:
-- - a held run that ends (cancelled) is no longer held; its due_at is again when it was due;
-- - a statement that moves a held run's due time moves when it would be due; it stays held;
-- - a limited run that comes back to pending from anything but 'dispatched' (a retry, the reaper
--   rescuing a dead worker's run) frees its slot and waits for one again (a run sent back from
--   'dispatched', never started, keeps its slot and is claimed again);
-- - a limited run whose attempt ends (succeeded, failed, cancelled) or that is held again (paused)
--   frees its slot: exactly once, since only a fenced transition that matched gets here.
CREATE FUNCTION scheduler_flow_control() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.held IS NOT NULL AND NEW.status <> 'pending' THEN
        NEW.due_at := COALESCE(NEW.held_due_at, NEW.due_at);
        NEW.held := NULL;
        NEW.held_due_at := NULL;
    ELSIF OLD.held IS NOT NULL AND NEW.held IS NOT DISTINCT FROM OLD.held AND NEW.due_at <> 'infinity' THEN
        NEW.held_due_at := NEW.due_at;
        NEW.due_at := 'infinity';
    END IF;
    IF NEW.concurrency_key IS NOT NULL THEN
        IF NEW.status = 'pending' AND OLD.status NOT IN ('pending', 'dispatched') AND NEW.held IS NULL THEN
            NEW.held := 'concurrency';
            NEW.held_due_at := NEW.due_at;
            NEW.due_at := 'infinity';
        END IF;
        IF NEW.status IN ('succeeded', 'failed', 'cancelled') OR NEW.held IS NOT NULL THEN
            DELETE FROM concurrency_holders WHERE run_id = NEW.id;
        END IF;
    END IF;
    RETURN NEW;
END
$$;
-- The default path (no limit, not held) pays two NULL tests per updated row, nothing else.
CREATE TRIGGER job_runs_flow_control BEFORE UPDATE ON job_runs FOR EACH ROW
    WHEN (OLD.concurrency_key IS NOT NULL OR OLD.held IS NOT NULL)
    EXECUTE FUNCTION scheduler_flow_control();
"""

DOWNGRADE = r"""
DROP TRIGGER job_runs_flow_control ON job_runs;
DROP FUNCTION scheduler_flow_control();
DROP FUNCTION scheduler_run_hold(text, boolean, jsonb, jsonb, timestamptz);
DROP FUNCTION scheduler_concurrency_key(jsonb, jsonb);
DROP FUNCTION scheduler_job_in_flight(text, text);
DROP TABLE concurrency_holders;
DROP TABLE concurrency_slots;
DROP INDEX job_runs_held;
-- Held runs become plainly pending again, due when they would have been.
UPDATE job_runs SET due_at = held_due_at WHERE held IS NOT NULL;
ALTER TABLE job_runs DROP COLUMN held, DROP COLUMN held_due_at, DROP COLUMN concurrency_key;
ALTER TABLE jobs DROP COLUMN concurrency;
ALTER TABLE tenants DROP COLUMN paused;
"""


def upgrade() -> None:
    run_script(UPGRADE)


def downgrade() -> None:
    run_script(DOWNGRADE)
