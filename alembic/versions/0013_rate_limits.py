"""Rate limits (issue 17 item 3): at most `limit` runs of a key START in any window of
`period_seconds` (a sliding window), on the machinery of migration 0010.

A run of a rate-limited job is held from its insert (held 'rate_limit', due_at 'infinity', its due
time in held_due_at), keyed like a concurrency-limited run: job_runs.concurrency_key is the run's
flow key, computed from whichever limit its job has (a job has one or the other). The keeper grants
its key's room under the key's row lock in concurrency_slots (one lock per key for both kinds).

The window is rate_limit_starts: one row per grant. A granted run that has not started yet counts
as starting now (it may start at any moment: the claim, JetStream and a worker's fairness hold all
come between the grant and the start); once it starts the row takes its start time (the trigger
below, in the fenced statement that starts it) and counts until `period_seconds` after it. So a
grant is only made when fewer than `limit` runs of the key started in the last period or may still
start, and no window of the period can hold more than `limit` starts, whatever the delays between
grant and start. A granted run that ends without starting (cancelled) or is held again (paused)
leaves the window (it never started), and its key is looked at again.

A key with no room is not re-read until it has room: concurrency_slots.next_at is the earliest
time it can (the oldest counted start + the period; now + the period while every counted run is
still to start), and the keeper locks only keys whose next_at has passed. The held runs stay
held (due_at 'infinity') rather than being made due at that time: a future due_at would put each
of them back in the claim's index range, and moving 100k of them each period is the write storm
the held state exists to avoid; one timestamp per key is what waits instead.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02
"""

from app.db.migrations import run_script

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

UPGRADE = r"""
-- {"limit": n, "period_seconds": p, "key": "payload.a.b" | null}; null: no limit.
ALTER TABLE jobs ADD COLUMN rate_limit jsonb;
-- When a rate-limited key next has room (null: now, or a concurrency key).
ALTER TABLE concurrency_slots ADD COLUMN next_at timestamptz;

CREATE TABLE rate_limit_starts (
    run_id     uuid NOT NULL,
    tenant_id  text NOT NULL,
    job        text NOT NULL,
    key        text NOT NULL,
    granted_at timestamptz NOT NULL,
    -- null: granted, not started yet (counts as starting now).
    started_at timestamptz,
    PRIMARY KEY (run_id, granted_at)
);
CREATE INDEX rate_limit_starts_key ON rate_limit_starts (tenant_id, job, key, started_at);

-- Why a keyed run waits when it is (re)held: for a rate-limited job's room, else a slot.
CREATE FUNCTION scheduler_flow_hold_reason(rate_limit jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN $1 IS NOT NULL THEN 'rate_limit' ELSE 'concurrency' END
$$;

DROP FUNCTION scheduler_run_hold(text, boolean, jsonb, jsonb, timestamptz);
-- As in 0010, and a rate-limited job's run is held 'rate_limit' under the key its rate_limit names.
CREATE FUNCTION scheduler_run_hold(tenant_id text, job_paused boolean, concurrency jsonb, rate_limit jsonb,
                                   payload jsonb, due timestamptz)
RETURNS TABLE (held text, held_due_at timestamptz, due_at timestamptz, concurrency_key text)
LANGUAGE sql STABLE AS $$
    SELECT h.held,
           CASE WHEN h.held IS NOT NULL THEN $6 END,
           CASE WHEN h.held IS NOT NULL THEN 'infinity'::timestamptz ELSE $6 END,
           scheduler_concurrency_key(COALESCE($3, $4), $5)
    FROM (SELECT CASE WHEN $2 OR (SELECT t.paused FROM tenants t WHERE t.id = $1) THEN 'paused'
                      WHEN $3 IS NOT NULL OR $4 IS NOT NULL THEN scheduler_flow_hold_reason($4) END AS held) AS h
$$;

-- 0010's trigger function, and for keyed runs of a rate-limited job:
-- - a run sent back to pending from an attempt (a retry, a rescue) waits for the window again: its
--   next attempt is another start (the job's rate_limit says which hold; one lookup, on that rare
--   transition only);
-- - the start (dispatched -> running, or succeeded for an inline run) gives its window row the
--   start time;
-- - a run that ends or is held again before it started leaves the window.
-- Still fired only for keyed or held rows (the WHEN of 0010 is unchanged): the default path pays
-- nothing more.
CREATE OR REPLACE FUNCTION scheduler_flow_control() RETURNS trigger LANGUAGE plpgsql AS $$
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
            NEW.held := scheduler_flow_hold_reason(
                (SELECT j.rate_limit FROM jobs j WHERE j.tenant_id = NEW.tenant_id AND j.name = NEW.job));
            NEW.held_due_at := NEW.due_at;
            NEW.due_at := 'infinity';
        END IF;
        IF OLD.status = 'dispatched' AND NEW.status IN ('running', 'succeeded') THEN
            UPDATE rate_limit_starts SET started_at = NEW.started_at
            WHERE run_id = NEW.id AND started_at IS NULL;
        END IF;
        IF NEW.status IN ('succeeded', 'failed', 'cancelled') OR NEW.held IS NOT NULL THEN
            DELETE FROM concurrency_holders WHERE run_id = NEW.id;
            DELETE FROM rate_limit_starts WHERE run_id = NEW.id AND started_at IS NULL;
            IF FOUND THEN
                -- Its place in the window is free again: the keeper looks at the key on its next pass.
                UPDATE concurrency_slots SET next_at = NULL
                WHERE tenant_id = NEW.tenant_id AND job = NEW.job AND key = NEW.concurrency_key
                  AND next_at IS NOT NULL;
            END IF;
        END IF;
    END IF;
    RETURN NEW;
END
$$;
"""

DOWNGRADE = r"""
-- Runs waiting for a rate limit become plainly pending again, due when they would have been.
UPDATE job_runs SET held = NULL, due_at = held_due_at, held_due_at = NULL, concurrency_key = NULL
WHERE held = 'rate_limit';
UPDATE job_runs r SET concurrency_key = NULL FROM jobs j
WHERE j.tenant_id = r.tenant_id AND j.name = r.job AND j.rate_limit IS NOT NULL
  AND r.concurrency_key IS NOT NULL AND r.status IN ('pending', 'dispatched', 'running');
CREATE OR REPLACE FUNCTION scheduler_flow_control() RETURNS trigger LANGUAGE plpgsql AS $$
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
DROP FUNCTION scheduler_run_hold(text, boolean, jsonb, jsonb, jsonb, timestamptz);
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
DROP FUNCTION scheduler_flow_hold_reason(jsonb);
DROP TABLE rate_limit_starts;
ALTER TABLE concurrency_slots DROP COLUMN next_at;
ALTER TABLE jobs DROP COLUMN rate_limit;
"""


def upgrade() -> None:
    run_script(UPGRADE)


def downgrade() -> None:
    run_script(DOWNGRADE)
