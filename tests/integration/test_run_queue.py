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
from tests.integration.test_run_history import Outcome, fence_of  # Outcome: as finish_runs takes it

# Live runs as the queue must hold them, and the queue as it is: each side's rows the other lacks. A
# row a run's start left dispatched (migration 0029) stands for the running run.
MISMATCH = """
WITH expected AS (
    SELECT id, scheduled_at, tenant_id, priority, due_at, scheduler_queue_state(status, held) AS state,
           lease_expires_at, dispatched_at
    FROM job_runs WHERE status IN ('pending', 'dispatched', 'running')
), actual AS (
    SELECT q.id, q.scheduled_at, q.tenant_id, q.priority, q.due_at,
           CASE WHEN r.left_by_start THEN scheduler_queue_running() ELSE q.state END,
           CASE WHEN r.left_by_start THEN r.lease_expires_at ELSE q.lease_expires_at END, q.dispatched_at
    FROM run_queue q
    LEFT JOIN LATERAL (
        SELECT r.lease_expires_at, q.state = scheduler_queue_dispatched() AND r.status = 'running' AS left_by_start
        FROM job_runs r WHERE r.id = q.id AND r.scheduled_at = q.scheduled_at
    ) AS r ON true
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
        fence = fence_of(claimed)
        assert await in_step(conn) == (0, 0)
        await repo.start_runs(conn, fence, [False] * 6, owner="w", lease_seconds=30)  # -> running
        assert await in_step(conn) == (0, 0)
        assert await conn.fetchval("SELECT count(*) FROM run_queue WHERE state = 1") == 6  # left by the start
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


async def queue_row(conn: asyncpg.Connection, fence: Fence) -> asyncpg.Record:
    row = await conn.fetchrow(
        "SELECT q.state, q.lease_expires_at, q.expires_at, r.lease_expires_at AS run_lease"
        " FROM run_queue q JOIN job_runs r ON r.id = q.id AND r.scheduled_at = q.scheduled_at"
        " WHERE q.id = $1",
        fence.ids[0],
    )
    assert row is not None
    return row


async def test_a_start_leaves_the_queue_row_and_the_reaper_finds_a_lost_run_in_time(
    pool: asyncpg.Pool,
) -> None:
    """The start leaves a run's queue row dispatched, under the dispatch lease. The reaper, reading
    such rows early by as much as the dispatch lease outlasts the run's, finds a lost run as soon as
    its own lease lapses, and moves a live one's row on; a heartbeat brings the row up to date."""
    async with pool.acquire() as conn:
        await factories.runs(conn, 3)
        lost, alive, beating = [fence_of([r]) for r in await claim(conn, cap=500, batch=3)]  # lease 30 s
        await repo.start_runs(conn, lost, [False], owner="w", lease_seconds=0.3)  # its worker then dies
        for fence in (alive, beating):
            await repo.start_runs(conn, fence, [False], owner="w", lease_seconds=10)
        for fence in (lost, alive, beating):
            row = await queue_row(conn, fence)
            assert row["state"] == 1 and row["lease_expires_at"] > row["run_lease"]
        await repo.heartbeat_runs(conn, beating, 10)  # a later transaction: the row is brought up to date
        row = await queue_row(conn, beating)
        assert row["state"] == 2 and row["lease_expires_at"] == row["run_lease"]

        await asyncio.sleep(0.5)  # the lost run's own lease lapses; its queue row's does not
        assert await repo.reap_running_runs(conn, 10, lead=0) == []  # read on time, it would be late
        reaped = await repo.reap_running_runs(conn, 10, lead=30 - 0.3)
        assert [(r["id"], r["status"]) for r in reaped] == [(lost.ids[0], "pending")]
        assert await in_step(conn) == (0, 0)

        # A live run's row read early is moved on: running, under the run's own lease.
        reaped = await repo.reap_running_runs(conn, 10, lead=30)
        assert reaped == []
        row = await queue_row(conn, alive)
        assert row["state"] == 2 and row["lease_expires_at"] == row["run_lease"]
        assert await in_step(conn) == (0, 0)


async def test_a_first_start_under_a_deadline_rewrites_the_queue_row(pool: asyncpg.Pool) -> None:
    """A run's deadline to start binds only until its first start: that start takes it out of
    run_queue_expiring (the row is rewritten), so the expiry sweep never reads it again."""
    async with pool.acquire() as conn:
        [made] = await factories.runs(conn, 1)
        await conn.execute(
            "UPDATE job_runs SET expires_at = now() + interval '1 hour' WHERE id = $1", made["id"]
        )
        fence = fence_of(await claim(conn, cap=500, batch=1))  # lease 30 s
        assert (await queue_row(conn, fence))["expires_at"] is not None
        await repo.start_runs(conn, fence, [False], owner="w", lease_seconds=60)
        row = await queue_row(conn, fence)
        assert row["state"] == 2 and row["expires_at"] is None
        assert await in_step(conn) == (0, 0)
