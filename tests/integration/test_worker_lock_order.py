"""A worker's heartbeat and its finish lock the runs they share in one order, by id, whatever order
the worker holds them in: otherwise each can take one run and wait for the other's, and Postgres
fails one of them to break the cycle (an outcome recorded a second late, a lease not renewed)."""

from __future__ import annotations

import asyncio

import asyncpg
import httpx

from app.config import Settings
from app.db import transitions
from tests.integration.test_dependency_release import claim_and_start, waiting_on_a_lock
from tests.integration.test_run_history import Outcome, fence_of
from tests.support import submit_run


async def until_waiting(pool: asyncpg.Pool, conn: asyncpg.Connection) -> None:
    async with asyncio.timeout(10):
        while not await waiting_on_a_lock(pool, conn.get_server_pid()):
            await asyncio.sleep(0.01)


async def test_a_heartbeat_and_a_finish_of_the_same_runs_never_wait_on_each_other(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    for _ in range(2):
        await submit_run(api, "acme", tenant["auth"], job="hello")
    started = await claim_and_start(pool, settings)
    # Runs enough that each statement finds its runs by their key, in the order it names them (on
    # a near-empty table the planner scans it, and both statements meet the runs in the same order).
    later = "now() + interval '1 hour'"
    await pool.execute(
        f"INSERT INTO job_runs (id, scheduled_at, tenant_id, job, payload, target, max_attempts, "
        f"backoff_seconds, timeout_seconds, due_at) SELECT scheduler_run_id({later}), {later}, 'acme', "
        f"'hello', '{{}}', '{{\"type\": \"noop\"}}', 1, 1, 30, {later} FROM generate_series(1, 5000)"
    )
    await pool.execute("ANALYZE job_runs")
    low, high = sorted(started.values(), key=lambda r: r["id"])
    holder, beating, finishing = [await asyncpg.connect(settings.database_url) for _ in range(3)]
    try:
        async with holder.transaction():
            # The lower run is held a moment (as another statement would): the heartbeat, naming it
            # first, queues for it; the finish names the runs the other way round and queues behind.
            await holder.execute("SELECT 1 FROM job_runs WHERE id = $1 FOR UPDATE", low["id"])
            beat = asyncio.create_task(transitions.heartbeat_runs(beating, fence_of([low, high]), 30))
            await until_waiting(pool, beating)
            ok = [Outcome(ok=True)] * 2
            end = asyncio.create_task(transitions.finish_runs(finishing, fence_of([high, low]), ok))
            await until_waiting(pool, finishing)
        kept, finished = await asyncio.wait_for(asyncio.gather(beat, end, return_exceptions=True), 30)
    finally:
        for conn in (holder, beating, finishing):
            await conn.close()
    assert kept == {low["id"], high["id"]}, kept  # no DeadlockDetectedError on either side
    assert not isinstance(finished, BaseException), finished
    assert {r["id"]: r["status"] for r in finished} == {low["id"]: "succeeded", high["id"]: "succeeded"}
