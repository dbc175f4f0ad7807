"""run_queue (migration 0017): one narrow row per live run, kept in step with job_runs by statement
triggers whatever writes the runs, and a claim that finds runs there without ever waiting for a
writer (whose trigger may be waiting for the claim's queue row)."""

from __future__ import annotations

import asyncio

import asyncpg

from app.db import flow, runs
from app.db import transitions as repo
from app.db.transitions import Fence
from tests import factories
from tests.integration.test_claim import claim
from tests.integration.test_run_history import Outcome  # a worker's outcome, as finish_runs takes it

# Live runs as the queue must hold them, and the queue as it is: each side's rows the other lacks.
MISMATCH = """
WITH expected AS (
    SELECT id, scheduled_at, tenant_id, priority, due_at, scheduler_queue_state(status, held) AS state,
           lease_expires_at, dispatched_at
    FROM job_runs WHERE status IN ('pending', 'dispatched', 'running')
), actual AS (
    SELECT id, scheduled_at, tenant_id, priority, due_at, state, lease_expires_at, dispatched_at FROM run_queue
)
SELECT (SELECT count(*) FROM (SELECT * FROM expected EXCEPT ALL SELECT * FROM actual) AS m) AS missing,
       (SELECT count(*) FROM (SELECT * FROM actual EXCEPT ALL SELECT * FROM expected) AS s) AS stale
"""


async def in_step(conn: asyncpg.Connection) -> tuple[int, int]:
    row = await conn.fetchrow(MISMATCH)
    assert row is not None
    return row["missing"], row["stale"]


async def test_the_queue_follows_every_writer(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        made = await factories.runs(conn, 12)
        # The other job's runs fall due later: no claim below takes them, the pause holds both.
        later = await conn.fetchval("SELECT now() + interval '1 hour'")
        await factories.runs(conn, 2, job_name="other", start=later)
        assert await in_step(conn) == (0, 0)
        assert await conn.fetchval("SELECT count(*) FROM run_queue WHERE state = 0") == 14

        claimed = await claim(conn, cap=500, batch=6)  # pending -> dispatched, leased
        fence = Fence([(r["id"], r["scheduled_at"], r["epoch"]) for r in claimed])
        assert await in_step(conn) == (0, 0)
        await repo.start_runs(conn, fence, [False] * 6, owner="w", lease_seconds=30)  # -> running
        assert await in_step(conn) == (0, 0)
        await repo.heartbeat_runs(conn, fence, 60)  # a new lease
        assert await in_step(conn) == (0, 0)
        await repo.finish_runs(
            conn, fence, [Outcome(True, outcome="succeeded")] * 6
        )  # ended: out of the queue
        assert await in_step(conn) == (0, 0)

        rest = [r for r in made if r["id"] not in {c["id"] for c in claimed}]
        await runs.cancel_run(conn, rest[0]["id"], None)
        await runs.reschedule_run(
            conn, rest[1]["id"], None, await conn.fetchval("SELECT now() + interval '1h'")
        )
        assert await in_step(conn) == (0, 0)
        await runs.retry_runs(conn, None, [rest[0]["id"]])  # cancelled -> pending again
        assert await in_step(conn) == (0, 0)

        await flow.set_job_paused(conn, "acme", "other", True)
        await flow.hold_paused_runs(conn, "acme", "other")  # held: state 3, outside the claim's rows
        assert await conn.fetchval("SELECT count(*) FROM run_queue WHERE state = 3") == 2
        assert await in_step(conn) == (0, 0)
        await flow.set_job_paused(conn, "acme", "other", False)
        await flow.release_paused_runs(conn, "acme", "other")
        assert await in_step(conn) == (0, 0)

        await conn.execute("DELETE FROM job_runs WHERE id = $1", rest[2]["id"])
        assert await in_step(conn) == (0, 0)
        await conn.execute("TRUNCATE job_runs")
        assert await conn.fetchval("SELECT count(*) FROM run_queue") == 0


async def test_a_claim_skips_a_run_another_transaction_holds_instead_of_waiting(pool: asyncpg.Pool) -> None:
    """A writer that holds a run (a cancel, a start) takes its queue row in its trigger; a claim that
    had locked that queue row and then waited for the run would deadlock with it. The claim takes
    the runs with SKIP LOCKED: the held run is left for a later claim, the others are claimed now."""
    async with pool.acquire() as conn:
        made = await factories.runs(conn, 5)
    held = made[0]
    async with pool.acquire() as writer, pool.acquire() as engine:
        async with writer.transaction():
            await writer.execute(
                "SELECT 1 FROM job_runs WHERE id = $1 AND scheduled_at = $2 FOR UPDATE",
                held["id"],
                held["scheduled_at"],
            )
            first = await asyncio.wait_for(
                claim(engine, cap=500, batch=500), timeout=5
            )  # would block on the lock
        assert {r["id"] for r in first} == {r["id"] for r in made[1:]}
        second = await claim(engine, cap=500, batch=500)
    assert [r["id"] for r in second] == [held["id"]]
