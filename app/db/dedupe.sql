-- The unique and debounce rules' keys: the statements of app/db/dedupe.py.
-- Named blocks, loaded by app/db/queries.py (which says how they are written).

-- name: claim_dedupe_keys
-- The keys of the runs about to be submitted, for the jobs with a unique or debounce rule (migration
-- 0021), claimed in dedupe_keys (INSERT … ON CONFLICT: exact however many requests race) for the ids
-- minted here, which insert_runs then inserts in the same transaction. The first run of each key in the
-- request claims it, in key order, so two requests never wait for each other's keys in opposite
-- orders; the tenant's flow lock is taken first, as insert_runs takes it. A key another run holds is
-- taken over when its window is over, or when the caller found its holder ended (:released) under the
-- row lock that this ON CONFLICT took on it the first time (DO UPDATE locks the row even when its
-- WHERE is false, and then writes nothing). A row per input, in order: `job_exists`; for a job with a
-- rule, its key, and the id and scheduled_at to insert it with if `claimed`.
WITH input AS (
    SELECT i.ord, i.job, COALESCE(i.scheduled_at, now()) AS scheduled_at, CAST(i.payload AS jsonb) AS payload
    FROM unnest(CAST(:jobs AS text[]), CAST(:scheduled_ats AS timestamptz[]), CAST(:payloads AS text[]))
         WITH ORDINALITY AS i(job, scheduled_at, payload, ord)
),
keyed AS (
    SELECT i.ord, j.name AS job, i.scheduled_at,
           CASE WHEN j."unique" IS NOT NULL OR j.debounce IS NOT NULL THEN scheduler_run_id(i.scheduled_at) END AS id,
           scheduler_dedupe_key(COALESCE(j."unique", j.debounce), COALESCE(i.payload, j.payload)) AS key,
           now() + make_interval(secs => CAST(j."unique"->>'within_seconds' AS float8)) AS window_ends_at,
           i.scheduled_at + make_interval(secs => CAST(j.debounce->>'max_delay_seconds' AS float8)) AS latest_due_at
    FROM input i JOIN jobs j ON j.tenant_id = :tenant_id AND j.name = i.job
    WHERE EXISTS (SELECT FROM scheduler_tenant_flow(:tenant_id))
),
claimed AS (
    INSERT INTO dedupe_keys AS k (tenant_id, job, key, run_id, run_scheduled_at, window_ends_at, latest_due_at)
    SELECT DISTINCT ON (job, key) :tenant_id, job, key, id, scheduled_at, window_ends_at, latest_due_at
    FROM keyed WHERE key IS NOT NULL
    ORDER BY job, key, ord
    ON CONFLICT (tenant_id, job, key) DO UPDATE
    SET run_id = excluded.run_id, run_scheduled_at = excluded.run_scheduled_at,
        window_ends_at = excluded.window_ends_at, latest_due_at = excluded.latest_due_at
    WHERE k.window_ends_at <= now() OR k.run_id = ANY(CAST(:released AS uuid[]))
    RETURNING k.run_id
)
SELECT i.ord, keyed.job IS NOT NULL AS job_exists, keyed.key, keyed.id, keyed.scheduled_at,
       keyed.id IN (SELECT run_id FROM claimed) AS claimed
FROM input i LEFT JOIN keyed ON keyed.ord = i.ord
ORDER BY i.ord;

-- name: dedupe_holders
-- The runs holding these keys (:jobs[i], :keys[i]) of the tenant, read by a submitter whose
-- claim_dedupe_keys found them taken: it holds their rows' locks (that ON CONFLICT took them), so
-- they cannot change before it commits. `debounced`: the rule the job has now.
SELECT k.job, k.key, k.run_id, k.run_scheduled_at, k.window_ends_at, j.debounce IS NOT NULL AS debounced
FROM dedupe_keys k
JOIN jobs j ON j.tenant_id = k.tenant_id AND j.name = k.job
WHERE k.tenant_id = :tenant_id
  AND (k.job, k.key) IN (SELECT * FROM unnest(CAST(:jobs AS text[]), CAST(:keys AS text[])));

-- name: jobs_with_dedupe_rules
-- Whether any of these jobs of the tenant has a unique or debounce rule: a submission refused for
-- the tenant's backlog quota may still be answered with runs that exist.
SELECT EXISTS (SELECT 1 FROM jobs WHERE tenant_id = :tenant_id AND name = ANY(CAST(:names AS text[]))
                                    AND ("unique" IS NOT NULL OR debounce IS NOT NULL));

-- name: debounce_runs
-- fires: job_runs_count_group_runs, job_runs_flow_control, job_runs_queue_changed
-- Later submissions of debounced keys fold into the runs holding them (:ids, one submission each):
-- each replaces its run's payload (null: the job's) and makes it due its period after the
-- submission's scheduled_at (default now), never past the key's latest_due_at. The caller holds
-- the keys' row locks, so one key's submissions fold one at a time. Only into a run still pending
-- that holds no slot: a claim that locked the run first made it the worker's (this then finds it
-- dispatched and matches nothing), and a run granted its concurrency slot or rate-limit room is due
-- and on its way; either way the caller makes a new run, the next window's. A held run stays held:
-- the flow trigger (migration 0010) keeps the new time in held_due_at. A run now due wakes the
-- engines, as reschedule_run does.
WITH folds AS (
    SELECT f.id, f.payload, f.scheduled_at, k.latest_due_at, j.payload AS job_payload,
           make_interval(secs => CAST(j.debounce->>'period_seconds' AS float8)) AS period
    FROM unnest(CAST(:ids AS uuid[]), CAST(:jobs AS text[]), CAST(:keys AS text[]), CAST(:payloads AS text[]),
                CAST(:scheduled_ats AS timestamptz[])) AS f(id, job, key, payload, scheduled_at)
    JOIN dedupe_keys k ON k.tenant_id = :tenant_id AND k.job = f.job AND k.key = f.key AND k.run_id = f.id
    JOIN jobs j ON j.tenant_id = :tenant_id AND j.name = f.job AND j.debounce IS NOT NULL
),
folded AS (
    UPDATE job_runs r
    SET payload = COALESCE(CAST(folds.payload AS jsonb), folds.job_payload),
        due_at = least(folds.latest_due_at, COALESCE(folds.scheduled_at, now()) + folds.period)
    FROM folds
    WHERE r.id = folds.id AND r.scheduled_at >= :lo AND r.scheduled_at < :hi AND r.tenant_id = :tenant_id
      AND r.status = 'pending' AND (r.concurrency_key IS NULL OR r.held IS NOT NULL)
    RETURNING r.*
),
notified AS (
    SELECT pg_notify(:channel, CAST(min(scheduled_at) AS text)) FROM folded WHERE due_at <= now()
    HAVING count(*) > 0
)
SELECT * FROM folded WHERE (SELECT count(*) FROM notified) >= 0;

-- name: sweep_dedupe_keys
-- The keys that hold nothing any more among the next :limit rows after the cursor (so every row is
-- looked at in turn): a window that is over, or, without a window, a run that ended or went with its
-- day. A row is locked before it goes and only as it was read: one a submitter holds is skipped, and
-- one a submitter took over since (another run, another window) no longer matches. Returns how many
-- went and the last row looked at (no row: the end was reached).
WITH examined AS (
    SELECT tenant_id, job, key, run_id, run_scheduled_at, window_ends_at FROM dedupe_keys
    WHERE (tenant_id, job, key) > (:tenant_id, :job, :key)
    ORDER BY tenant_id, job, key
    LIMIT :limit
),
free AS (
    SELECT k.tenant_id, k.job, k.key FROM dedupe_keys k
    JOIN examined e ON e.tenant_id = k.tenant_id AND e.job = k.job AND e.key = k.key
    WHERE k.run_id = e.run_id AND k.window_ends_at IS NOT DISTINCT FROM e.window_ends_at
      AND CASE WHEN e.window_ends_at IS NOT NULL THEN e.window_ends_at <= now()
               ELSE NOT EXISTS (SELECT 1 FROM job_runs r
                                WHERE r.id = e.run_id AND r.scheduled_at = e.run_scheduled_at
                                  AND r.status IN ('pending', 'dispatched', 'running')) END
    FOR UPDATE OF k SKIP LOCKED
),
swept AS (
    DELETE FROM dedupe_keys k USING free f
    WHERE k.tenant_id = f.tenant_id AND k.job = f.job AND k.key = f.key
    RETURNING 1
)
SELECT (SELECT count(*) FROM swept) AS swept, e.tenant_id, e.job, e.key
FROM examined e
ORDER BY e.tenant_id DESC, e.job DESC, e.key DESC
LIMIT 1;
