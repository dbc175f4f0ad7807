"""LANES: engines and workers that serve one lane only, so urgent runs can have processes (and CPU)
of their own. Real Postgres and NATS."""

from __future__ import annotations

import asyncio

import asyncpg
import nats
import pytest

from app.bus.jetstream import ensure_consumer
from app.config import Settings
from app.engine.dispatcher import Dispatcher
from app.worker.consumer import Worker
from stack.dispatch import dispatch_once
from stack.eventually import eventually
from tests import factories
from tests.integration.test_engine_faults import statuses

BULK = 9
URGENT = 0


async def status_by_tenant(pool: asyncpg.Pool) -> dict[tuple[str, str], int]:
    async with pool.acquire() as conn:
        rows = await conn.fetch("SELECT tenant_id, status, count(*) AS n FROM job_runs GROUP BY 1, 2")
    return {(r["tenant_id"], r["status"]): r["n"] for r in rows}


@pytest.mark.parametrize(
    ("lanes", "claimed", "left"), [("urgent", "interactive", "bulk"), ("normal", "bulk", "interactive")]
)
async def test_an_engine_claims_only_for_the_lanes_it_serves(
    settings: Settings, pool: asyncpg.Pool, lanes: str, claimed: str, left: str
) -> None:
    s = settings.model_copy(update={"lanes": lanes})
    async with pool.acquire() as conn:
        await factories.runs(conn, 300, tenant_id="bulk", priority=BULK)
        await factories.runs(conn, 30, tenant_id="interactive", priority=URGENT)
    nc = await nats.connect(s.nats_url)
    stop = asyncio.Event()
    await ensure_consumer(nc.jetstream(), s)
    engine = asyncio.create_task(Dispatcher(s, pool, nc).run(stop))
    try:
        counts = await eventually(
            lambda: status_by_tenant(pool),
            until=lambda c: c.get((claimed, "dispatched"), 0) == (30 if claimed == "interactive" else 300),
            timeout=10,
        )
        await asyncio.sleep(0.5)  # a wake-up or a poll later, the other lane is still untouched
        assert await status_by_tenant(pool) == counts
        assert counts[(left, "pending")] == (300 if left == "bulk" else 30)
    finally:
        stop.set()
        await engine
        await nc.close()


async def test_a_worker_fetches_only_from_the_lanes_it_serves(settings: Settings, pool: asyncpg.Pool) -> None:
    """An urgent-only worker runs the urgent runs and leaves the rest in their stream, where a
    normal-only worker takes them."""
    async with pool.acquire() as conn:
        await factories.runs(conn, 200, tenant_id="bulk", priority=BULK)
        await factories.runs(conn, 20, tenant_id="interactive", priority=URGENT)
    nc = await nats.connect(settings.nats_url)
    stop = asyncio.Event()
    workers: list[asyncio.Task[None]] = []
    try:
        await ensure_consumer(nc.jetstream(), settings)
        dispatcher = Dispatcher(settings, pool, nc)
        while await dispatch_once(dispatcher):
            pass
        assert await statuses(pool) == {"dispatched": 220}
        urgent_only = settings.model_copy(update={"lanes": "urgent"})
        workers.append(asyncio.create_task(Worker(urgent_only, pool, nc).run(stop)))
        counts = await eventually(
            lambda: status_by_tenant(pool),
            until=lambda c: c.get(("interactive", "succeeded"), 0) == 20,
            timeout=10,
        )
        await asyncio.sleep(0.5)
        assert (
            await status_by_tenant(pool)
            == counts
            == {("interactive", "succeeded"): 20, ("bulk", "dispatched"): 200}
        )
        normal_only = settings.model_copy(update={"lanes": "normal"})
        workers.append(asyncio.create_task(Worker(normal_only, pool, nc).run(stop)))
        await eventually(lambda: statuses(pool), until=lambda c: c == {"succeeded": 220}, timeout=20)
    finally:
        stop.set()
        await asyncio.gather(*workers, return_exceptions=True)
        await nc.close()
