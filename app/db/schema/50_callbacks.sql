-- The callback outbox: a run with a callback gets its row in the transaction that ends it, and the
-- workers' callback loop delivers it (claimed with a lease, fenced by epoch). The row outlives
-- nothing it needs: a day of runs is kept while any of its callbacks is still owed (its runs are the
-- callbacks' bodies), and its finished rows go with it (scheduler_retire_day_partition).

CREATE TABLE run_callbacks (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id            uuid,  -- NULL for a group's completion callback (group_id)
    run_scheduled_at  timestamptz NOT NULL,  -- the run's partition key: one partition per lookup
    tenant_id         text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    url               text NOT NULL,
    status            text NOT NULL DEFAULT 'pending'
                      CHECK (status IN ('pending', 'delivering', 'delivered', 'failed')),
    attempts          integer NOT NULL DEFAULT 0,
    -- The delivery fence: every claim bumps it, and an outcome is recorded only at the epoch it was
    -- claimed with, so a worker that lost its claim (killed, stalled past the lease) records nothing.
    epoch             bigint NOT NULL DEFAULT 0,
    -- When the next attempt is due; while delivering, when the claim lapses.
    due_at            timestamptz NOT NULL DEFAULT now(),
    lease_owner       text,
    last_error        text,
    created_at        timestamptz NOT NULL DEFAULT now(),
    finished_at       timestamptz,
    group_id          uuid  -- a group's completion callback: the group
);
-- A group's delivery state on GET …/groups/{id}.
CREATE INDEX run_callbacks_group ON run_callbacks (group_id) WHERE group_id IS NOT NULL;
-- The deliverers' claim: what is due or whose claim lapsed.
CREATE INDEX run_callbacks_due ON run_callbacks (due_at) WHERE status IN ('pending', 'delivering');
-- A run's delivery state on GET /runs/{id}.
CREATE INDEX run_callbacks_run ON run_callbacks (run_id);
-- Retirement: the callbacks of one day's runs.
CREATE INDEX run_callbacks_day ON run_callbacks (run_scheduled_at);


CREATE FUNCTION scheduler_record_callback() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO run_callbacks (run_id, run_scheduled_at, tenant_id, url)
    VALUES (NEW.id, NEW.scheduled_at, NEW.tenant_id, NEW.callback ->> 'url');
    RETURN NULL;
END
$$;
-- A run whose status changes to an end its callback asks for (callback.on). A row trigger on the
-- parent: cloned onto every partition, present and future (ATTACH clones it too).
CREATE TRIGGER job_runs_record_callback AFTER UPDATE OF status ON job_runs
FOR EACH ROW
WHEN (NEW.callback IS NOT NULL AND NEW.status IS DISTINCT FROM OLD.status
      AND NEW.status IN ('succeeded', 'failed', 'cancelled', 'expired') AND (NEW.callback -> 'on') ? NEW.status)
EXECUTE FUNCTION scheduler_record_callback();
