"""The worker's fenced start: dispatched -> running, or straight to succeeded for a run with nothing
to execute (noop), and never twice or for a stale epoch."""

from __future__ import annotations

import asyncpg

from app.config import Settings
from app.db import transitions as dispatch_repo
from app.db.transitions import Fence
from app.engine.claims import claim_scan
from app.engine.floor import ClaimBounds
from tests import factories


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
