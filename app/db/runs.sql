-- Runs as the API sees them (insert, read, list, cancel, retry, reschedule, bulk actions) and the
-- idempotency keys: the statements of app/db/runs.py.
-- Named blocks, loaded by app/db/queries.py (which says how they are written).

-- name: insert_runs
-- fires: job_runs_queue_added, job_runs_record_tags
-- One statement for one run or a batch of 1000: the ids are minted first (their leading 48 bits are
-- scheduled_at, so the id names the partition), the job's settings are snapshot onto each run (its
-- priority unless the run brings its own), and the input's ordinal comes back so the caller can answer
-- in request order. All or nothing: if one
-- run names an unknown job, or brings tags that with its job's make more than :max_tags, no run is
-- inserted (the caller sees fewer rows than it sent and finds which with claim_dedupe_keys and
-- job_tags), so even a batch sent without a transaction never half-writes. Payloads and metadata
-- arrive as JSON text, not jsonb[]: an array parameter would read a payload that is itself a JSON
-- array as one more dimension of the parameter; for the same reason a run's tags arrive joined by
-- commas (no tag has one).
-- A run of a job with a `unique` or `debounce` rule (migration 0021) is inserted only with the key
-- and the id that claim_dedupe_keys claimed for it, earlier in the caller's transaction: without
-- them, nothing is inserted either, and the caller claims the keys first. :run_ids, :dedupe_keys,
-- :tags and :metadatas are null when no run has them (unnest then pads them with nulls).
WITH input AS (
    SELECT i.ord,
           COALESCE(i.scheduled_at, now()) AS scheduled_at,
           i.job, CAST(i.payload AS jsonb) AS payload, i.idempotency_key, i.priority,
           CAST(i.callback AS jsonb) AS callback, i.expires_at, i.claimed_id, i.dedupe_key,
           string_to_array(i.tags, ',') AS tags, CAST(i.metadata AS jsonb) AS metadata
    FROM unnest(CAST(:jobs AS text[]), CAST(:scheduled_ats AS timestamptz[]), CAST(:payloads AS text[]),
                CAST(:idempotency_keys AS text[]), CAST(:priorities AS smallint[]),
                CAST(:callbacks AS text[]), CAST(:expires_ats AS timestamptz[]), CAST(:run_ids AS uuid[]),
                CAST(:dedupe_keys AS text[]), CAST(:tags AS text[]), CAST(:metadatas AS text[]))
         WITH ORDINALITY AS i(job, scheduled_at, payload, idempotency_key, priority, callback, expires_at,
                              claimed_id, dedupe_key, tags, metadata, ord)
),
minted AS (
    SELECT input.*, COALESCE(input.claimed_id, scheduler_run_id(input.scheduled_at)) AS id FROM input
),
tenant AS (
    -- The tenant's pause and max_in_flight and its paused jobs, read under its flow lock (migration
    -- 0016): a change of them that commits while this insert runs is waited for and read, one that
    -- comes later waits for this commit and then holds these runs itself. Read with the statement's
    -- snapshot, a run inserted in that instant escaped the new setting.
    SELECT paused, max_in_flight, paused_jobs FROM scheduler_tenant_flow(:tenant_id)
),
complete AS (
    -- Does every input name a job of this tenant, with the key it claimed if the job has a rule,
    -- and room for its own tags beside the job's?
    SELECT NOT EXISTS (
        SELECT 1 FROM input WHERE NOT EXISTS (
            SELECT 1 FROM jobs j WHERE j.tenant_id = :tenant_id AND j.name = input.job
              AND (input.dedupe_key IS NOT NULL OR (j."unique" IS NULL AND j.debounce IS NULL))
              AND (input.tags IS NULL OR cardinality(scheduler_run_tags(j.tags, input.tags)) <= :max_tags))
    ) AS yes
),
inserted AS (
    -- A run of a paused job or tenant, or of a concurrency- or rate-limited job, is held from the
    -- start (scheduler_run_hold, migrations 0010, 0013, 0014 and 0016): out of the claim's range
    -- until resumed, given a slot or given room in its key's window. Its deadline to start is its
    -- own or its job's expire_after_seconds after it is scheduled (none when the job has none). A
    -- debounced run is due its period after it was submitted for (its scheduled_at stays, as a
    -- retried run's does).
    INSERT INTO job_runs (id, scheduled_at, tenant_id, job, origin, payload, target, max_attempts,
                          backoff_seconds, timeout_seconds, due_at, idempotency_key, traceparent, priority, callback,
                          held, held_due_at, concurrency_key, expires_at, counts_failures, dedupe_key,
                          tags, metadata, group_id)
    SELECT m.id, m.scheduled_at, j.tenant_id, j.name, 'api', COALESCE(m.payload, j.payload), j.target,
           j.max_attempts, j.backoff_seconds, j.timeout_seconds, h.due_at, m.idempotency_key,
           :traceparent, COALESCE(m.priority, j.priority), COALESCE(m.callback, j.callback),
           h.held, h.held_due_at, h.concurrency_key,
           COALESCE(m.expires_at, m.scheduled_at + make_interval(secs => j.expire_after_seconds)),
           scheduler_counts_failures(j.pause_after_failures), m.dedupe_key,
           CASE WHEN m.tags IS NULL THEN j.tags ELSE scheduler_run_tags(j.tags, m.tags) END, m.metadata,
           CAST(:group_id AS uuid)
    FROM minted m
    JOIN jobs j ON j.tenant_id = :tenant_id AND j.name = m.job
    CROSS JOIN tenant t
    CROSS JOIN LATERAL scheduler_run_hold(t.paused, t.max_in_flight, j.name = ANY(t.paused_jobs),
                                          j.concurrency, j.rate_limit, COALESCE(m.payload, j.payload),
                                          CASE WHEN j.debounce IS NULL THEN m.scheduled_at
                                               ELSE m.scheduled_at + make_interval(
                                                   secs => CAST(j.debounce->>'period_seconds' AS float8)) END) AS h
    WHERE (SELECT yes FROM complete)
    RETURNING *
),
notified AS (
    -- Wakes idle engines when the transaction commits, for runs already due; the payload lowers
    -- their claim floor to the oldest of them. In this statement, so a plain submission is one
    -- round trip. `:notify` lets the caller skip it: NOTIFY serializes commits (see submission.py).
    SELECT pg_notify(:channel, CAST(min(scheduled_at) AS text)) FROM inserted
    WHERE scheduled_at <= now() AND :notify
    HAVING count(*) > 0
)
SELECT inserted.*, minted.ord FROM inserted JOIN minted USING (id)
WHERE (SELECT count(*) FROM notified) >= 0  -- evaluated once, so the NOTIFY is sent
ORDER BY minted.ord;

-- name: job_tags
-- The error path of insert_runs: the default tags of those of these jobs the tenant has (a name
-- missing here is a job it does not have).
SELECT name, tags FROM jobs WHERE tenant_id = :tenant_id AND name = ANY(CAST(:names AS text[]));

-- name: find_idempotency_keys
-- A key holds until maintenance deletes it (delete_expired_idempotency_keys), never by a clock here:
-- its run may be scheduled, or retried, long after the key was written.
SELECT key, run_id, body_hash FROM idempotency_keys
WHERE tenant_id = :tenant_id AND key = ANY(CAST(:keys AS text[]));

-- name: insert_idempotency_keys
-- A concurrent request with the same key, not yet committed, makes this insert wait on it; the
-- lock_timeout set per row (before its insert, so it bounds that wait) turns a wait longer than
-- :in_flight_wait into LockNotAvailable, which the caller answers 409. A key that comes back
-- missing was committed by the other request meanwhile: the caller retries and replays it.
-- expires_at is a floor: the grace after the submission or after scheduled_at, whichever is later.
INSERT INTO idempotency_keys (tenant_id, key, run_id, run_scheduled_at, body_hash, expires_at)
SELECT :tenant_id, k.key, k.run_id, k.run_scheduled_at, k.body_hash,
       greatest(now(), k.run_scheduled_at) + make_interval(secs => :grace_seconds)
FROM unnest(CAST(:keys AS text[]), CAST(:run_ids AS uuid[]), CAST(:run_scheduled_ats AS timestamptz[]),
            CAST(:body_hashes AS text[]))
     AS k(key, run_id, run_scheduled_at, body_hash)
WHERE set_config('lock_timeout', CAST(:in_flight_wait AS text), true) IS NOT NULL
ON CONFLICT (tenant_id, key) DO NOTHING
RETURNING key;

-- name: delete_expired_idempotency_keys
-- A key goes once its floor passed and its run has been terminal for the grace period, or once its
-- run is gone with its day partition: never while a retry could still be resubmitted as a duplicate.
DELETE FROM idempotency_keys
WHERE ctid = ANY (ARRAY(
    SELECT k.ctid FROM idempotency_keys k
    WHERE k.expires_at <= now()
      AND NOT EXISTS (
          SELECT 1 FROM job_runs r
          WHERE r.id = k.run_id AND r.scheduled_at = k.run_scheduled_at
            AND (r.finished_at IS NULL OR r.finished_at > now() - make_interval(secs => :grace_seconds)))
    LIMIT :limit));

-- name: count_pending_runs
-- Admission control counts at most quota + 1 rows: the answer is "over" or "not over", never a
-- full count of a large backlog.
-- Unheld pending runs are counted from run_queue_tenant_due; held runs count too, from the held
-- index, one descent per reason.
SELECT LEAST(:limit, (SELECT count(*) FROM (
            SELECT 1 FROM run_queue WHERE tenant_id = :tenant_id AND state = scheduler_queue_pending()
            LIMIT :limit) AS p)
     + (SELECT count(*) FROM (
            SELECT 1 FROM job_runs
            WHERE held = ANY(CAST(:held_reasons AS text[])) AND tenant_id = :tenant_id AND status = 'pending'
            LIMIT :limit) AS h));

-- name: get_run
-- The id's leading 48 bits are scheduled_at in ms, so [lo, hi) is one millisecond: one partition.
-- A run of another tenant is not found: :tenant_id NULL (the admin) sees every tenant's.
-- held_until: a run waiting for its key's rate limit is not due before the key's window has room.
SELECT r.*, (SELECT s.next_at FROM concurrency_slots s
             WHERE r.held = 'rate_limit' AND s.tenant_id = r.tenant_id AND s.job = r.job
               AND s.key = r.concurrency_key) AS held_until
FROM job_runs r
WHERE r.id = :id AND r.scheduled_at >= :lo AND r.scheduled_at < :hi
  AND (CAST(:tenant_id AS text) IS NULL OR r.tenant_id = :tenant_id);

-- name: get_runs
-- Several runs by id; the bounds let the planner prune to the days the ids name.
SELECT * FROM job_runs
WHERE id = ANY(CAST(:ids AS uuid[])) AND scheduled_at >= :lo AND scheduled_at < :hi;

-- name: list_runs
-- Newest first, keyset-paginated on (scheduled_at, id) so each page is an index range scan.
SELECT * FROM job_runs
WHERE tenant_id = :tenant_id
  AND (CAST(:status AS text) IS NULL OR status = :status)
  AND (CAST(:job AS text) IS NULL OR job = :job)
  AND (CAST(:scheduled_after AS timestamptz) IS NULL OR scheduled_at >= :scheduled_after)
  AND (CAST(:scheduled_before AS timestamptz) IS NULL OR scheduled_at < :scheduled_before)
  AND (CAST(:cursor_at AS timestamptz) IS NULL OR (scheduled_at, id) < (:cursor_at, :cursor_id))
ORDER BY scheduled_at DESC, id DESC
LIMIT :limit;

-- name: list_tagged_runs
-- list_runs of the runs carrying every tag of :tags, in the same order and pages, read from run_tags
-- (migration 0022): one tag's entries from the cursor on, its key (tenant_id, tag, scheduled_at,
-- run_id) read backwards day by day, each joined to its run by the run's key; the run must carry the
-- other tags and pass the other filters; the tag that leads is scheduler_lead_tag's (migration 0022),
-- so a rare tag bounds the read even beside a common one. OFFSET 0 keeps the join a loop that stops
-- with the page: planned as a whole, it was a hash join over every run of the tag (1.8 s for a page
-- of a tag on 600k runs, 1.4 ms as a loop).
SELECT r.* FROM run_tags t
CROSS JOIN LATERAL (
    SELECT * FROM job_runs r
    WHERE r.id = t.run_id AND r.scheduled_at = t.scheduled_at AND r.tenant_id = :tenant_id
      AND r.tags @> CAST(:tags AS text[])
      AND (CAST(:status AS text) IS NULL OR r.status = :status)
      AND (CAST(:job AS text) IS NULL OR r.job = :job)
    OFFSET 0) AS r
WHERE t.tenant_id = :tenant_id AND t.tag = (SELECT scheduler_lead_tag(:tenant_id, CAST(:tags AS text[])))
  AND (CAST(:scheduled_after AS timestamptz) IS NULL OR t.scheduled_at >= :scheduled_after)
  AND (CAST(:scheduled_before AS timestamptz) IS NULL OR t.scheduled_at < :scheduled_before)
  AND (CAST(:cursor_at AS timestamptz) IS NULL OR (t.scheduled_at, t.run_id) < (:cursor_at, :cursor_id))
  AND (CAST(:cursor_at AS timestamptz) IS NULL OR t.scheduled_at <= :cursor_at)  -- prunes the days after it
ORDER BY t.scheduled_at DESC, t.run_id DESC
LIMIT :limit;

-- name: cancel_run
-- fires: job_runs_count_group_runs, job_runs_flow_control, job_runs_queue_changed, job_runs_record_callback, job_runs_settle_dependents
-- A run that has not ended is cancelled: pending, dispatched (its message is skipped on arrival: its
-- start finds no 'dispatched' row) or running. A running run's attempt is closed in its history as
-- `cancelled` by this statement, and its worker, told by the caller over NATS or by its next
-- heartbeat, stops it; its late outcome matches no 'running' row and changes nothing (a retry moves
-- the run to a new epoch besides). `was`: the status the run had, read under its row lock.
-- Scoped like get_run: another tenant's run is never touched.
WITH target AS (
    SELECT id, scheduled_at, status FROM job_runs
    WHERE id = :id AND scheduled_at >= :lo AND scheduled_at < :hi
      AND status IN ('pending', 'dispatched', 'running')
      AND (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id)
    FOR UPDATE
)
UPDATE job_runs r SET status = 'cancelled', finished_at = now(), lease_owner = NULL, lease_expires_at = NULL,
    attempts = CASE WHEN t.status <> 'running' THEN r.attempts
                    ELSE scheduler_append_attempt(r.attempts, r.max_attempts, r.attempt, r.epoch, r.lease_owner,
                                                  r.started_at, 'cancelled', NULL, NULL) END
FROM target t
WHERE r.id = t.id AND r.scheduled_at = t.scheduled_at AND r.scheduled_at >= :lo AND r.scheduled_at < :hi
RETURNING r.*, t.status AS was;

-- name: run_lateness
-- Why a pending run is not running yet, from what the database knows (the Run page's "why is this
-- run late"): its own due time (a held run keeps it in held_due_at), its hold, its job's and
-- tenant's pause, its key's slots taken and limit (or its rate limit, the starts in its window and
-- when the window next has room), its tenant's max_in_flight and slots taken, the runs of its key
-- waiting before it, and the
-- tenant's due runs the claim takes before it (higher priority, or the same and due earlier). The
-- counts stop at :limit. Scoped like get_run: another tenant's run is not found.
WITH r AS (
    SELECT id, tenant_id, job, priority, held, concurrency_key, COALESCE(held_due_at, due_at) AS due
    FROM job_runs
    WHERE id = :id AND scheduled_at >= :lo AND scheduled_at < :hi AND status = 'pending'
      AND (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id)
)
SELECT r.held, r.due, r.tenant_id, extract(epoch FROM now() - r.due) AS late_seconds,
       j.paused AS job_paused, t.paused AS tenant_paused,
       t.max_in_flight, CASE WHEN t.max_in_flight IS NOT NULL THEN scheduler_tenant_in_flight(t.id) END
           AS tenant_in_flight,
       CAST(j.concurrency->>'limit' AS int) AS concurrency_limit, r.concurrency_key,
       (SELECT count(*) FROM concurrency_holders h
        WHERE h.tenant_id = r.tenant_id AND h.job = r.job AND h.key = r.concurrency_key) AS key_in_flight,
       CAST(j.rate_limit->>'limit' AS int) AS rate_limit, CAST(j.rate_limit->>'period_seconds' AS float8) AS rate_period,
       (SELECT count(*) FROM rate_limit_starts s
        WHERE s.tenant_id = r.tenant_id AND s.job = r.job AND s.key = r.concurrency_key
          AND (s.started_at IS NULL
               OR s.started_at > now() - make_interval(secs => CAST(j.rate_limit->>'period_seconds' AS float8)))
       ) AS key_in_window,
       (SELECT s.next_at FROM concurrency_slots s
        WHERE s.tenant_id = r.tenant_id AND s.job = r.job AND s.key = r.concurrency_key) AS key_next_at,
       (SELECT count(*) FROM (
            SELECT 1 FROM job_runs o
            WHERE o.held = r.held AND o.tenant_id = r.tenant_id AND o.job = r.job
              AND o.concurrency_key = r.concurrency_key AND o.held_due_at < r.due
            LIMIT :limit) AS w) AS key_waiting_before,
       (SELECT count(*) FROM (
            SELECT 1 FROM run_queue o
            WHERE o.state = scheduler_queue_pending() AND o.tenant_id = r.tenant_id AND o.due_at <= now()
              AND o.id <> r.id
              AND (o.priority < r.priority OR (o.priority = r.priority AND o.due_at <= r.due))
            LIMIT :limit) AS a) AS due_before
FROM r
LEFT JOIN jobs j ON j.tenant_id = r.tenant_id AND j.name = r.job
JOIN tenants t ON t.id = r.tenant_id;

-- name: match_runs
-- One chunk of a bulk action: the keys and statuses of a tenant's runs matching the filter, in the
-- listing's order (newest scheduled first) from the cursor on. Keys only, no payloads: a chunk is
-- hundreds of runs. No lock is taken here; the transition that follows re-checks each status.
SELECT id, scheduled_at, status FROM job_runs
WHERE tenant_id = :tenant_id
  AND (CAST(:statuses AS text[]) IS NULL OR status = ANY(CAST(:statuses AS text[])))
  AND (CAST(:job AS text) IS NULL OR job = :job)
  AND (CAST(:ids AS uuid[]) IS NULL OR id = ANY(CAST(:ids AS uuid[])))
  AND (NOT CAST(:by_error AS boolean) OR last_error IS NOT DISTINCT FROM CAST(:error AS text))
  AND (CAST(:scheduled_after AS timestamptz) IS NULL OR scheduled_at >= :scheduled_after)
  AND (CAST(:scheduled_before AS timestamptz) IS NULL OR scheduled_at < :scheduled_before)
  AND (CAST(:cursor_at AS timestamptz) IS NULL OR (scheduled_at, id) < (:cursor_at, :cursor_id))
ORDER BY scheduled_at DESC, id DESC
LIMIT :limit;

-- name: match_tagged_runs
-- match_runs of the runs carrying every tag of :tags, read as list_tagged_runs reads them.
SELECT r.id, r.scheduled_at, r.status FROM run_tags t
CROSS JOIN LATERAL (
    SELECT r.id, r.scheduled_at, r.status FROM job_runs r
    WHERE r.id = t.run_id AND r.scheduled_at = t.scheduled_at AND r.tenant_id = :tenant_id
      AND r.tags @> CAST(:tags AS text[])
      AND (CAST(:statuses AS text[]) IS NULL OR r.status = ANY(CAST(:statuses AS text[])))
      AND (CAST(:job AS text) IS NULL OR r.job = :job)
      AND (CAST(:ids AS uuid[]) IS NULL OR r.id = ANY(CAST(:ids AS uuid[])))
      AND (NOT CAST(:by_error AS boolean) OR r.last_error IS NOT DISTINCT FROM CAST(:error AS text))
    OFFSET 0) AS r
WHERE t.tenant_id = :tenant_id AND t.tag = (SELECT scheduler_lead_tag(:tenant_id, CAST(:tags AS text[])))
  AND (CAST(:scheduled_after AS timestamptz) IS NULL OR t.scheduled_at >= :scheduled_after)
  AND (CAST(:scheduled_before AS timestamptz) IS NULL OR t.scheduled_at < :scheduled_before)
  AND (CAST(:cursor_at AS timestamptz) IS NULL OR (t.scheduled_at, t.run_id) < (:cursor_at, :cursor_id))
  AND (CAST(:cursor_at AS timestamptz) IS NULL OR t.scheduled_at <= :cursor_at)  -- prunes the days after it
ORDER BY t.scheduled_at DESC, t.run_id DESC
LIMIT :limit;

-- name: cancel_runs
-- fires: job_runs_count_group_runs, job_runs_flow_control, job_runs_queue_changed, job_runs_record_callback, job_runs_settle_dependents
-- A bulk cancel's chunk: like cancel_run (running runs included, their attempt closed as
-- `cancelled`), fenced on the status, scoped to the tenant. Rows the claim (or a worker's start,
-- heartbeat or finish) holds at this instant are skipped, not waited for: waiting in the opposite
-- order to the claim's could deadlock with it. The caller tries the skipped ones again.
-- [lo, hi) are the days the ids name (as in get_runs).
WITH locked AS (
    SELECT id, scheduled_at, status FROM job_runs
    WHERE id = ANY(CAST(:ids AS uuid[])) AND tenant_id = :tenant_id
      AND status IN ('pending', 'dispatched', 'running')
      AND scheduled_at >= :lo AND scheduled_at < :hi
    FOR UPDATE SKIP LOCKED
)
UPDATE job_runs r SET status = 'cancelled', finished_at = now(), lease_owner = NULL, lease_expires_at = NULL,
    attempts = CASE WHEN l.status <> 'running' THEN r.attempts
                    ELSE scheduler_append_attempt(r.attempts, r.max_attempts, r.attempt, r.epoch, r.lease_owner,
                                                  r.started_at, 'cancelled', NULL, NULL) END
FROM locked l
WHERE r.id = l.id AND r.scheduled_at = l.scheduled_at AND r.scheduled_at >= :lo AND r.scheduled_at < :hi
RETURNING r.id, r.epoch, l.status AS was;

-- name: retry_runs
-- fires: job_runs_count_group_runs, job_runs_flow_control, job_runs_queue_changed
-- failed | cancelled | expired -> pending, due now, under a new epoch: a worker still finishing an
-- old attempt holds the old epoch, so its outcome matches nothing and is discarded. One statement for
-- one run (POST /runs/{id}/retry) or a bulk chunk. max_attempts becomes :max_attempts (which must
-- exceed the attempts made), or else one more than made if none is left. last_error, started_at and
-- the attempt count stay as the run's history. No lock waits on anyone: the claim and
-- the workers never hold finished rows. Wakes the engines at commit; the payloads are the
-- oldest and newest scheduled_at retried, so a run due before its scheduled_at (see
-- run_queue_pulled_forward, migration 0017) raises their claim ceiling at once. [lo, hi) are the
-- days the ids name (as in get_runs). A run of a limited job or tenant waits for its slots again (the
-- trigger of 0010 holds a run with a concurrency key); one that ended before its tenant got a
-- max_in_flight has none yet, so it gets one and is held here (the trigger does not fire for it).
-- Each tenant's max_in_flight is read under its flow lock, as insert_runs reads it. A deadline to
-- start that has passed goes (an expired run's always has: retried, it would only expire again); one
-- still ahead stays.
WITH flow AS (
    SELECT d.tenant_id, f.max_in_flight
    FROM (SELECT DISTINCT tenant_id FROM job_runs
          WHERE id = ANY(CAST(:ids AS uuid[])) AND status IN ('failed', 'cancelled', 'expired')
            AND scheduled_at >= :lo AND scheduled_at < :hi
            AND (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id)) AS d
    CROSS JOIN LATERAL scheduler_tenant_flow(d.tenant_id) AS f
),
retried AS (
    UPDATE job_runs r SET status = 'pending', epoch = r.epoch + 1,
        due_at = CASE WHEN r.concurrency_key IS NULL AND t.max_in_flight IS NOT NULL THEN 'infinity' ELSE now() END,
        held = CASE WHEN r.concurrency_key IS NULL AND t.max_in_flight IS NOT NULL THEN 'concurrency' END,
        held_due_at = CASE WHEN r.concurrency_key IS NULL AND t.max_in_flight IS NOT NULL THEN now() END,
        concurrency_key = CASE WHEN t.max_in_flight IS NOT NULL THEN COALESCE(r.concurrency_key, '')
                               ELSE r.concurrency_key END,
        max_attempts = COALESCE(CAST(:max_attempts AS int), greatest(r.max_attempts, r.attempt + 1)),
        expires_at = CASE WHEN r.expires_at > now() THEN r.expires_at END,
        finished_at = NULL, dispatched_at = NULL, lease_owner = NULL, lease_expires_at = NULL
    FROM flow t
    WHERE t.tenant_id = r.tenant_id AND r.id = ANY(CAST(:ids AS uuid[]))
      AND r.status IN ('failed', 'cancelled', 'expired')
      AND r.scheduled_at >= :lo AND r.scheduled_at < :hi
      AND (CAST(:tenant_id AS text) IS NULL OR r.tenant_id = :tenant_id)
      AND (CAST(:max_attempts AS int) IS NULL OR :max_attempts > r.attempt)
      AND r.attempt < :attempts_cap
    RETURNING r.*
),
notified AS (
    SELECT pg_notify(:channel, CAST(b.at AS text))
    FROM (SELECT min(scheduled_at) AS at FROM retried UNION SELECT max(scheduled_at) FROM retried) AS b
    WHERE b.at IS NOT NULL
)
SELECT * FROM retried
WHERE (SELECT count(*) FROM notified) >= 0;  -- evaluated once, so the NOTIFY is sent

-- name: reschedule_run
-- fires: job_runs_count_group_runs, job_runs_flow_control, job_runs_queue_changed
-- A pending run's due_at moves, earlier (a past time means now) or later; scheduled_at, its id and
-- its partition stay. Fenced on 'pending': once claimed it is the worker's, and this matches nothing.
-- A run now due before its scheduled_at is found by the claim through run_queue_pulled_forward; the
-- NOTIFY (only when due now) wakes the engines and, its payload being the run's scheduled_at,
-- raises their claim ceiling to it at once.
WITH moved AS (
    UPDATE job_runs SET due_at = greatest(:due_at, now())
    WHERE id = :id AND scheduled_at >= :lo AND scheduled_at < :hi AND status = 'pending'
      AND (CAST(:tenant_id AS text) IS NULL OR tenant_id = :tenant_id)
    RETURNING *
),
notified AS (
    SELECT pg_notify(:channel, CAST(scheduled_at AS text)) FROM moved WHERE due_at <= now()
)
SELECT * FROM moved
WHERE (SELECT count(*) FROM notified) >= 0;
