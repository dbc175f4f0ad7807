"""Workloads written straight into Postgres (tenants, noop jobs, backlogs, history), and the read-backs
the scenarios judge by. The statements are named blocks with named binds, compiled once by the app's
own loader (app.db.queries.parse), like app/db/*.sql; they are the bench's, not the app's."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timedelta
from typing import Any

import asyncpg

from app.db.queries import Conn, parse
from app.db.wakeups import DUE_CHANNEL

NOOP = {"type": "noop"}
# A target that runs the worker's whole execute path (a task, the start and the separate outcome
# write) with no I/O of its own: the echo handler the package registers.
ECHO = {"type": "python", "handler": "echo"}

SQL = parse(r"""
-- name: seed_tenants
-- Tenants t000..t(N-1), each with a noop job `noop`, as the API would have created them.
WITH t AS (
    INSERT INTO tenants (id, signing_secret)
    -- A Standard Webhooks secret (whsec_ + base64 of 32 random bytes), as the API mints them.
    SELECT 't' || lpad(CAST(g AS text), 3, '0'),
           'whsec_' || encode(decode(md5(random()::text) || md5(random()::text), 'hex'), 'base64')
    FROM generate_series(0, :tenants - 1) AS g
    ON CONFLICT (id) DO NOTHING
    RETURNING id
)
INSERT INTO jobs (tenant_id, name, target, max_attempts, backoff_seconds)
SELECT id, 'noop', CAST(:target AS jsonb), 1, 1 FROM t;

-- name: insert_backlog
-- N pending noop runs over the tenants, scheduled and due from :first_at every :step seconds. With
-- :contiguous false, round-robin over the tenants (so no tenant crowds a batch); with it true, each
-- tenant's runs in one block (as a tenant's batch arrives), tenant k's due k microseconds after
-- tenant k-1's, so the claim meets them block by block. Ids are minted by the schema's own
-- scheduler_run_id().
INSERT INTO job_runs (id, scheduled_at, tenant_id, job, payload, target, max_attempts, backoff_seconds,
                      timeout_seconds, due_at)
SELECT scheduler_run_id(s.at), s.at, 't' || lpad(CAST(k.t AS text), 3, '0'), 'noop',
       CAST('{}' AS jsonb), CAST(:target AS jsonb), 1, 1, 30, s.at
FROM generate_series(0, CAST(:n AS int) - 1) AS g
CROSS JOIN LATERAL (
    SELECT CASE WHEN CAST(:contiguous AS boolean)
                THEN g / CAST(ceil(CAST(:n AS float8) / CAST(:tenants AS int)) AS int)
                ELSE g % CAST(:tenants AS int) END
) AS k(t)
CROSS JOIN LATERAL (
    SELECT CAST(:first_at AS timestamptz) + make_interval(
        secs => g * CAST(:step AS float8) + CASE WHEN CAST(:contiguous AS boolean) THEN k.t * 1e-6 ELSE 0 END)
) AS s(at);

-- name: set_backlog_priority
-- The standing backlog's priority (steady --standing): every pending run's, before submissions start.
UPDATE job_runs SET priority = :priority WHERE status = 'pending';

-- name: insert_held_backlog
-- N runs of tenant t000's job :job held back (:held 'paused', 'concurrency' or 'rate_limit', key ''),
-- as the API would insert them for a paused, concurrency- or rate-limited job: out of the claim's
-- range (migrations 0010, 0012).
INSERT INTO job_runs (id, scheduled_at, tenant_id, job, payload, target, max_attempts, backoff_seconds,
                      timeout_seconds, due_at, held, held_due_at, concurrency_key)
SELECT scheduler_run_id(s.at), s.at, 't000', :job, CAST('{}' AS jsonb), CAST(:target AS jsonb), 1, 1, 30,
       'infinity', :held, s.at, CASE WHEN :held <> 'paused' THEN '' END
FROM generate_series(0, :n - 1) AS g
CROSS JOIN LATERAL (
    SELECT CAST(:first_at AS timestamptz) + make_interval(secs => g * CAST(:step AS float8))
) AS s(at);

-- name: insert_history
-- Terminal (succeeded) runs, rows :first .. :first + :n - 1 of a history spread evenly over the
-- :days whole UTC days before :today, so every daily partition of those days gets its share.
INSERT INTO job_runs (id, scheduled_at, tenant_id, job, status, payload, target, max_attempts,
                      backoff_seconds, timeout_seconds, attempt, epoch, due_at, dispatched_at, started_at,
                      finished_at)
SELECT scheduler_run_id(s.at), s.at, 't' || lpad(CAST(g % :tenants AS text), 3, '0'), 'noop', 'succeeded',
       CAST('{}' AS jsonb), CAST(:target AS jsonb), 1, 1, 30, 1, 1, s.at, s.at, s.at, s.at
FROM generate_series(CAST(:first AS bigint), CAST(:first AS bigint) + :n - 1) AS g
CROSS JOIN LATERAL (
    SELECT CAST(:today AS timestamptz) - make_interval(days => 1 + CAST(g % :days AS int))
           + make_interval(secs => CAST((CAST(g AS bigint) * 7919) % 86400 AS float8))
) AS s(at);

-- name: notify_due
-- What a submission does at commit: wake idle engines and lower their claim floor.
SELECT pg_notify(:channel, :floor);

-- name: clock
SELECT clock_timestamp();

-- name: pending_hints
SELECT id, due_at FROM job_runs WHERE status = 'pending';

-- name: backlog_as_claimed
-- The pending backlog shaped like claim_due_runs' RETURNING (epoch as the claim would make it),
-- so the publish-only figures send exactly the bytes the dispatcher sends.
SELECT id, scheduled_at, tenant_id, job, payload::text AS payload_json, target::text AS target_json,
       attempt, max_attempts, timeout_seconds, epoch + 1 AS epoch, due_at, priority, traceparent, 0.0 AS lag
FROM job_runs WHERE status = 'pending' ORDER BY due_at;

-- name: status_counts
SELECT status, count(*) AS runs, count(*) FILTER (WHERE epoch <> 1) AS not_epoch_1
FROM job_runs GROUP BY status;

-- name: count_status
SELECT count(*) FROM job_runs WHERE status = :status;

-- name: lag_percentiles
-- Due lag at each step of a run's life, over every succeeded run (seconds), or over one tenant's.
SELECT percentile_cont(CAST(:ps AS float8[]))
           WITHIN GROUP (ORDER BY extract(epoch FROM dispatched_at - due_at)) AS dispatched,
       percentile_cont(CAST(:ps AS float8[]))
           WITHIN GROUP (ORDER BY extract(epoch FROM started_at - due_at)) AS started,
       percentile_cont(CAST(:ps AS float8[]))
           WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - due_at)) AS finished,
       extract(epoch FROM max(finished_at) - min(due_at)) AS span
FROM job_runs WHERE status = 'succeeded' AND (CAST(:tenant AS text) IS NULL OR tenant_id = :tenant);

-- name: dispatch_span
-- From the earliest due_at to the last claim: the database's view of how long dispatching took.
SELECT extract(epoch FROM max(dispatched_at) - min(due_at)) FROM job_runs;

-- name: create_day_partition
SELECT scheduler_create_day_partition(CAST(:day AS date));

-- name: history_size
SELECT count(*) AS partitions, COALESCE(sum(pg_total_relation_size(i.inhrelid)), 0) AS bytes
FROM pg_inherits i WHERE i.inhparent = CAST('job_runs' AS regclass);
""")


async def fetch(conn: Conn, name: str, /, **values: Any) -> list[asyncpg.Record]:
    q = SQL[name]
    return list(await conn.fetch(q.sql, *q.args(values)))


async def fetchval(conn: Conn, name: str, /, **values: Any) -> Any:
    q = SQL[name]
    return await conn.fetchval(q.sql, *q.args(values))


async def execute(conn: Conn, name: str, /, **values: Any) -> str:
    q = SQL[name]
    return str(await conn.execute(q.sql, *q.args(values)))


def tenant_ids(tenants: int) -> list[str]:
    return [f"t{i:03d}" for i in range(tenants)]


async def seed_tenants(conn: Conn, tenants: int) -> None:
    await execute(conn, "seed_tenants", tenants=tenants, target=NOOP)


async def reset_runs(conn: Conn) -> None:
    """An empty job_runs (every partition) and its statistics, before the next backlog."""
    await conn.execute("TRUNCATE job_runs, idempotency_keys")


# The backlog's shapes: how a burst's runs are spread over tenants and instants (`api`, submitted
# through the HTTP API, is bench.api_backlog's).
SHAPES = ("interleaved", "contiguous", "distinct", "api")
SQL_SHAPES = {"interleaved": (False, 0.0), "contiguous": (True, 0.0), "distinct": (False, 1e-6)}


async def insert_backlog(
    conn: Conn,
    n: int,
    tenants: int,
    *,
    first_at: datetime,
    step: float,
    target: dict[str, str] = NOOP,
    contiguous: bool = False,
) -> None:
    await execute(
        conn,
        "insert_backlog",
        n=n,
        tenants=tenants,
        target=target,
        first_at=first_at,
        step=step,
        contiguous=contiguous,
    )


async def standing_backlog(conn: Conn, n: int, tenants: int, spread_seconds: float = 300.0) -> None:
    """Replace job_runs by N runs that fell due over the last `spread_seconds`, then ANALYZE."""
    await reset_runs(conn)
    now = await fetchval(conn, "clock")
    await insert_backlog(
        conn, n, tenants, first_at=now - timedelta(seconds=spread_seconds), step=spread_seconds / n
    )
    await conn.execute("ANALYZE job_runs, run_queue")


async def clock_offset(conn: Conn) -> float:
    """Database clock minus this process's wall clock (seconds), read at the query's midpoint."""
    before = time.time()
    db_now: datetime = await fetchval(conn, "clock")
    after = time.time()
    return db_now.timestamp() - (before + after) / 2


async def due_burst(
    conn: Conn,
    n: int,
    tenants: int,
    lead: float,
    *,
    analyze: bool = True,
    target: dict[str, str] = NOOP,
    shape: str = "interleaved",
) -> tuple[datetime, float]:
    """N runs that all fall due at one instant `lead` seconds from now (database clock), committed
    with the NOTIFY a submission sends. Processes that are already up see the backlog appear at
    once. With `analyze`, the statistics are refreshed in the same transaction (ANALYZE counts its
    own transaction's rows), as autovacuum would have done on a table in steady state. `shape`:
    interleaved (round-robin over tenants), contiguous (each tenant's runs in one block) or distinct
    (interleaved, each run due one microsecond after the one before: N distinct instants). Returns
    (due_at, the perf_counter() at which the drain can start): the due instant, or the commit if
    that came later."""
    offset = await clock_offset(conn)
    async with conn.transaction():
        due_at: datetime = await fetchval(conn, "clock") + timedelta(seconds=lead)
        contiguous, step = SQL_SHAPES[shape]
        await insert_backlog(
            conn, n, tenants, first_at=due_at, step=step, target=target, contiguous=contiguous
        )
        if analyze:
            await conn.execute("ANALYZE job_runs, run_queue")
        await execute(conn, "notify_due", channel=DUE_CHANNEL, floor=due_at.isoformat())
    committed, wall = time.perf_counter(), time.time()
    return due_at, committed + max(0.0, due_at.timestamp() - offset - wall)


async def wake_at(conn: Conn, start: float, due_at: datetime) -> None:
    """Sleep until the burst is due, then NOTIFY as a submission of a due run would: idle engines
    claim at once instead of at their next poll (up to poll_interval_seconds later)."""
    await asyncio.sleep(max(0.0, start - time.perf_counter()) + 0.02)
    await execute(conn, "notify_due", channel=DUE_CHANNEL, floor=due_at.isoformat())


async def seed_hot_index(conn: Conn, client: Any, key: str) -> int:
    """Put every pending run into the Redis sorted set `key`, scored by due time (HotIndex's layout)."""
    rows = await fetch(conn, "pending_hints")
    for i in range(0, len(rows), 10_000):
        await client.zadd(key, {str(r["id"]): r["due_at"].timestamp() for r in rows[i : i + 10_000]})
    return len(rows)


async def status_counts(conn: Conn) -> dict[str, tuple[int, int]]:
    """status -> (runs, runs whose epoch is not 1, i.e. claimed more than once)."""
    return {r["status"]: (r["runs"], r["not_epoch_1"]) for r in await fetch(conn, "status_counts")}


async def count_status(conn: Conn, status: str) -> int:
    return int(await fetchval(conn, "count_status", status=status))


async def create_past_partitions(conn: Conn, today: datetime, days: int) -> None:
    from bench.progress import tqdm

    for d in tqdm(range(1, days + 1), desc="past daily partitions", leave=False):
        await execute(conn, "create_day_partition", day=(today - timedelta(days=d)).date())


async def insert_history(conn: Conn, *, first: int, n: int, days: int, tenants: int, today: datetime) -> None:
    await execute(
        conn, "insert_history", first=first, n=n, days=days, tenants=tenants, target=NOOP, today=today
    )


async def history_size(conn: Conn) -> tuple[int, int]:
    row = (await fetch(conn, "history_size"))[0]
    return int(row["partitions"]), int(row["bytes"])
