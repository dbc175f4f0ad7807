"""The urgent lane (issue 17, priority): runs of priority <= URGENT_PRIORITY travel in a stream of
their own that workers read first, so an urgent run waits behind urgent work only — not behind what
backpressure already let into the workers' queue. Real Postgres and NATS."""

from __future__ import annotations

import asyncio

import asyncpg
import nats
from prometheus_client import REGISTRY

from app.bus.jetstream import ensure_consumer
from app.config import Settings
from app.engine.dispatcher import Dispatcher
from app.engine.reaper import Reaper
from app.worker.consumer import Worker
from stack.dispatch import dispatch_once
from stack.eventually import eventually
from tests import factories
from tests.integration.test_engine_faults import statuses
from tests.integration.test_slow_workers import reap_twice, take_and_ack_everything

BULK = 9
URGENT = 0


async def test_a_worker_starts_an_urgent_run_before_what_the_stream_already_holds(
    settings: Settings, pool: asyncpg.Pool
) -> None:
    """A worker taking 5 runs at a time is busy with 4,000 bulk runs already in the stream when an
    urgent run is dispatched: it starts the urgent run while most of the bulk still waits. In one
    lane the urgent run waited for every bulk run queued before it."""
    s = settings.model_copy(update={"worker_fetch_batch": 5, "worker_concurrency": 5})
    async with pool.acquire() as conn:
        await factories.runs(conn, 4000, tenant_id="bulk", priority=BULK)
    nc = await nats.connect(s.nats_url)
    stop = asyncio.Event()
    try:
        await ensure_consumer(nc.jetstream(), s)
        dispatcher = Dispatcher(s, pool, nc)
        while await dispatch_once(dispatcher):
            pass
        worker = asyncio.create_task(Worker(s, pool, nc).run(stop))
        await eventually(lambda: statuses(pool), until=lambda c: c.get("succeeded", 0) >= 100, timeout=30)
        async with pool.acquire() as conn:
            [urgent] = await factories.runs(conn, 1, tenant_id="interactive", priority=URGENT)
        assert await dispatch_once(dispatcher) == 1
        await eventually(lambda: statuses(pool), until=lambda c: c == {"succeeded": 4001}, timeout=60)
    finally:
        stop.set()
        await asyncio.gather(worker, return_exceptions=True)
        await nc.close()
    async with pool.acquire() as conn:
        overtaken, ahead = await conn.fetchrow(
            "SELECT count(*) FILTER (WHERE r.started_at > u.dispatched_at AND r.started_at < u.started_at),"
            "       count(*) FILTER (WHERE r.started_at > u.started_at)"
            " FROM job_runs r, job_runs u WHERE r.tenant_id = 'bulk' AND u.id = $1",
            urgent["id"],
        )
    # In one lane the urgent run started after every bulk run queued before it: none ahead.
    assert ahead >= 1000, f"only {ahead} bulk runs were still waiting when the urgent one started"
    # Those started while the urgent run went through the engine, NATS and the worker (a few batches
    # here; more on a loaded machine, where each hop waits for a core).
    assert overtaken < 500, f"{overtaken} bulk runs started between the urgent run's dispatch and its start"


async def test_a_full_queue_still_takes_urgent_runs(settings: Settings, pool: asyncpg.Pool) -> None:
    """Backpressure holds bulk runs pending once the workers' queue is full, but the urgent lane has
    room of its own: an urgent run submitted then is claimed at once, the bulk ones stay pending."""
    # A run a message, so that the bound in messages is one in runs (test_engine_faults covers more).
    s = settings.model_copy(update={"batch_size": 50, "max_queued_messages": 100, "message_runs": 1})
    async with pool.acquire() as conn:
        await factories.runs(conn, 1000, tenant_id="bulk", priority=BULK)
    nc = await nats.connect(s.nats_url)
    await ensure_consumer(nc.jetstream(), s)  # a consumer exists, but no worker drains it
    stop = asyncio.Event()
    engine = asyncio.create_task(Dispatcher(s, pool, nc).run(stop))
    try:
        full = await eventually(
            lambda: statuses(pool), until=lambda c: c.get("dispatched", 0) >= 100, timeout=10
        )
        await asyncio.sleep(1.0)  # paused: nothing more of the bulk goes out
        assert await statuses(pool) == full
        async with pool.acquire() as conn:
            urgent = await factories.runs(conn, 20, tenant_id="interactive", priority=URGENT)

        async def urgent_statuses() -> set[str]:
            async with pool.acquire() as conn:
                rows = await conn.fetch(
                    "SELECT DISTINCT status FROM job_runs WHERE id = ANY($1)", [r["id"] for r in urgent]
                )
            return {r["status"] for r in rows}

        await eventually(urgent_statuses, until=lambda st: st == {"dispatched"}, timeout=5)
    finally:
        stop.set()
        await engine
        await nc.close()
    counts = await statuses(pool)
    assert counts["dispatched"] == full["dispatched"] + 20 and counts["pending"] == full["pending"]


async def test_a_run_waiting_in_the_urgent_lane_is_not_re_dispatched(
    settings: Settings, pool: asyncpg.Pool
) -> None:
    """The reaper asks every lane what still waits: urgent runs queued behind busy workers keep their
    dispatch, and are rescued once nothing waits for them any more."""
    s = settings.model_copy(update={"dispatch_lease_seconds": 1.0, "publish_timeout_seconds": 0.5})
    async with pool.acquire() as conn:
        await factories.runs(conn, 20, tenant_id="queued", priority=URGENT)
    nc = await nats.connect(s.nats_url)
    try:
        await ensure_consumer(nc.jetstream(), s)
        assert await dispatch_once(Dispatcher(s, pool, nc)) == 20
        await asyncio.sleep(1.3)  # every lease has lapsed
        reaper = Reaper(s, pool, nc=nc)
        assert await reap_twice(reaper) == 0
        assert await statuses(pool) == {"dispatched": 20}
        urgent_lane = s.model_copy(
            update={"stream": s.urgent_stream, "subject_prefix": s.urgent_subject_prefix}
        )
        assert await take_and_ack_everything(nc, urgent_lane) == 20
        assert await reap_twice(reaper) == 20
    finally:
        await nc.close()


async def test_a_tenant_flooding_the_urgent_lane_does_not_hold_back_another_tenants_runs(
    settings: Settings, pool: asyncpg.Pool
) -> None:
    """Priority is the tenant's to set: a hostile tenant marking 3,000 runs priority 0 gets the
    urgent lane, not the others' work. A well-behaved tenant's 50 runs of the default priority,
    due after the flood, all end while most of the flood still waits."""
    s = settings.model_copy(update={"worker_fetch_batch": 20, "worker_concurrency": 20})
    async with pool.acquire() as conn:
        await factories.runs(conn, 3000, tenant_id="flood", priority=URGENT)
        behaved = await factories.runs(
            conn, 50, tenant_id="behaved", start=await conn.fetchval("SELECT now()")
        )
    nc = await nats.connect(s.nats_url)
    stop = asyncio.Event()
    engine = asyncio.create_task(Dispatcher(s, pool, nc).run(stop))
    worker = asyncio.create_task(Worker(s, pool, nc).run(stop))
    try:

        async def behaved_done() -> int:
            return int(
                await pool.fetchval(
                    "SELECT count(*) FROM job_runs WHERE id = ANY($1) AND status = 'succeeded'",
                    [r["id"] for r in behaved],
                )
            )

        await eventually(behaved_done, until=lambda n: n == 50, timeout=30)
        flood_left = await pool.fetchval(
            "SELECT count(*) FROM job_runs WHERE tenant_id = 'flood' AND status <> 'succeeded'"
        )
    finally:
        stop.set()
        await asyncio.gather(engine, worker)
        await nc.close()
    assert flood_left >= 1500, f"only {flood_left} flood runs were left: the test did not overlap them"


async def test_a_tenants_urgent_run_is_not_held_behind_its_own_earlier_runs(
    settings: Settings, pool: asyncpg.Pool
) -> None:
    """A worker full of one tenant's slow runs holds the rest of them back; an urgent run of the same
    tenant, fetched later, takes the next free slot instead of waiting behind every run held before
    it (app/worker/held.py)."""
    s = settings.model_copy(update={"worker_concurrency": 2, "worker_fetch_batch": 20})
    slow = {"type": "python", "handler": "echo"}
    async with pool.acquire() as conn:
        await factories.runs(conn, 12, tenant_id="a", priority=BULK, target=slow)
        await conn.execute("""UPDATE job_runs SET payload = '{"sleep": 1.0}'""")
    nc = await nats.connect(s.nats_url)
    stop = asyncio.Event()
    try:
        await ensure_consumer(nc.jetstream(), s)
        dispatcher = Dispatcher(s, pool, nc)
        assert await dispatch_once(dispatcher) == 12
        worker = Worker(s, pool, nc)
        running = asyncio.create_task(worker.run(stop))
        await eventually(lambda: asyncio.sleep(0, len(worker.held)), until=lambda n: n >= 8, timeout=10)
        async with pool.acquire() as conn:
            [urgent] = await factories.runs(conn, 1, tenant_id="a", priority=URGENT, target=slow)
        assert await dispatch_once(dispatcher) == 1
        await eventually(lambda: statuses(pool), until=lambda c: c == {"succeeded": 13}, timeout=30)
    finally:
        stop.set()
        await asyncio.gather(running, return_exceptions=True)
        await nc.close()
    async with pool.acquire() as conn:
        overtaken = await conn.fetchval(
            "SELECT count(*) FROM job_runs r, job_runs u"
            " WHERE r.priority = $2 AND u.id = $1 AND r.started_at > u.dispatched_at AND r.started_at < u.started_at",
            urgent["id"],
            BULK,
        )
    # At least 8 were held when it came. With lanes mixed in the held queue it started after all of
    # them; now only what started while the worker had not yet fetched it (a peek a second, runs of
    # a second on two slots) and the slot it waited for.
    assert overtaken <= 4, f"{overtaken} of the tenant's earlier runs started before its urgent run"


async def test_due_lag_is_observed_by_the_lane_each_run_travels_in(
    settings: Settings, pool: asyncpg.Pool
) -> None:
    def observed(lane: str) -> float:
        return REGISTRY.get_sample_value("scheduler_due_lag_seconds_count", {"lane": lane}) or 0.0

    before = {lane: observed(lane) for lane in ("normal", "urgent")}
    async with pool.acquire() as conn:
        await factories.runs(conn, 3, tenant_id="bulk", priority=BULK)
        await factories.runs(conn, 2, tenant_id="interactive", priority=URGENT)
    nc = await nats.connect(settings.nats_url)
    try:
        await ensure_consumer(nc.jetstream(), settings)
        assert await dispatch_once(Dispatcher(settings, pool, nc)) == 5
    finally:
        await nc.close()
    assert {lane: observed(lane) - before[lane] for lane in before} == {"normal": 3, "urgent": 2}
