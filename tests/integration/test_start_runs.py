"""The worker's fenced start: dispatched -> running, or straight to succeeded for a run with nothing
to execute (noop), and never twice or for a stale epoch."""

from __future__ import annotations

import asyncpg

from app.config import Settings
from app.db import transitions as dispatch_repo
from app.db.transitions import Fence, Starts
from app.engine.claims import claim_scan
from app.engine.floor import ClaimBounds
from tests import factories


async def start_as_worker(
    conn: asyncpg.Connection, fence: Fence, inline: list[bool], *, owner: str, lease_seconds: float
) -> Starts:
    """A worker's start of a fence (app.worker.starter): start_runs, then settle_unstarted_runs for
    the runs it did not start."""
    started = await dispatch_repo.start_runs(conn, fence, inline, owner=owner, lease_seconds=lease_seconds)
    if rest := started.unmatched(fence):
        started.add(
            await dispatch_repo.settle_unstarted_runs(
                conn, fence.taken(rest), [inline[i] for i in rest], owner=owner, lease_seconds=lease_seconds
            )
        )
    return started


async def test_inline_start_records_the_outcome_and_running_start_takes_a_lease(
    settings: Settings, pool: asyncpg.Pool
) -> None:
    async with pool.acquire() as conn:
        await factories.runs(conn, 3)
        claimed = await claim_scan(conn, settings, ClaimBounds())
        assert len(claimed) == 3
        noop, http, stale = claimed
        fence = Fence(
            [
                (noop["id"], noop["scheduled_at"], noop["epoch"]),
                (http["id"], http["scheduled_at"], http["epoch"]),
                (stale["id"], stale["scheduled_at"], stale["epoch"] - 1),  # a rescued run's old delivery
            ]
        )
        started = await dispatch_repo.start_runs(
            conn, fence, [True, False, True], owner="w1", lease_seconds=30
        )
        assert started == {noop["id"]: 1, http["id"]: 1}
        rows = {
            r["id"]: r
            for r in await conn.fetch(
                "SELECT id, status, attempt, started_at, finished_at, lease_owner, lease_expires_at"
                " FROM job_runs"
            )
        }
        assert rows[noop["id"]]["status"] == "succeeded"
        assert rows[noop["id"]]["finished_at"] == rows[noop["id"]]["started_at"] is not None
        # No lease; the owner stays, naming the worker of the run's attempt (its history entry).
        assert rows[noop["id"]]["lease_owner"] == "w1" and rows[noop["id"]]["lease_expires_at"] is None
        assert rows[http["id"]]["status"] == "running" and rows[http["id"]]["finished_at"] is None
        assert rows[http["id"]]["lease_owner"] == "w1" and rows[http["id"]]["lease_expires_at"] is not None
        assert rows[stale["id"]]["status"] == "dispatched" and rows[stale["id"]]["attempt"] == 0
        # A duplicate delivery of either matches nothing: nothing runs twice, nothing is rewritten.
        again = await dispatch_repo.start_runs(conn, fence, [True, False, True], owner="w2", lease_seconds=30)
        assert again == {}


async def test_the_start_leaves_what_is_not_free_to_start_and_the_settle_settles_it(
    settings: Settings, pool: asyncpg.Pool
) -> None:
    async with pool.acquire() as conn:
        late, free, free_now = (r["id"] for r in await factories.runs(conn, 3))
        (paused,) = (r["id"] for r in await factories.runs(conn, 1, job_name="k"))
        (resumed,) = (r["id"] for r in await factories.runs(conn, 1, job_name="r"))
        claimed = await claim_scan(conn, settings, ClaimBounds())
        # `free`'s delivery is a stale one (an earlier epoch) beside the others.
        fence = Fence([(r["id"], r["scheduled_at"], r["epoch"] - (r["id"] == free)) for r in claimed])
        await conn.execute("UPDATE job_runs SET expires_at = now() - interval '1 second' WHERE id = $1", late)
        await conn.execute("UPDATE jobs SET paused = true WHERE name IN ('k', 'r')")
        inline = [False] * len(fence.ids)

        started = await dispatch_repo.start_runs(conn, fence, inline, owner="w1", lease_seconds=30)
        assert started == {free_now: 1} and started.expired == set()
        rest = started.unmatched(fence)
        assert {fence.ids[i] for i in rest} == {late, free, paused, resumed}
        statuses = dict(await conn.fetch("SELECT id, status FROM job_runs"))
        assert {statuses[r] for r in (late, free, paused, resumed)} == {"dispatched"}  # left as they were

        await conn.execute("UPDATE jobs SET paused = false WHERE name = 'r'")  # resumed meanwhile
        settled = await dispatch_repo.settle_unstarted_runs(
            conn, fence.taken(rest), [inline[i] for i in rest], owner="w1", lease_seconds=30
        )
        # Expired, refused (no attempt either), started after all; the stale delivery matched nothing.
        assert settled == {late: None, paused: None, resumed: 1} and settled.expired == {late}
        statuses = dict(await conn.fetch("SELECT id, status FROM job_runs"))
        assert [statuses[r] for r in (late, free, paused, resumed, free_now)] == [
            "expired",
            "dispatched",
            "pending",
            "running",
            "running",
        ]
