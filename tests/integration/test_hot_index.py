"""The Redis hot index is a hint, never the truth (real Redis, real Postgres, real NATS)."""

from __future__ import annotations

import asyncio
import random
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import nats

from app import pending
from app.bus.hot_index import HotIndex
from app.bus.jetstream import ensure_stream
from app.config import Settings
from app.db import transitions as repo
from app.engine.dispatcher import Dispatcher
from app.telemetry import metrics
from stack.eventually import eventually
from tests import factories
from tests.support import api_client, published_runs


def hot_settings(settings: Settings, **overrides: object) -> Settings:
    return settings.model_copy(update={"hot_index": "redis", **overrides})


async def seeded_index(settings: Settings, runs: list[asyncpg.Record]) -> HotIndex:
    assert settings.redis_url
    index = HotIndex(settings.redis_url, f"{settings.stream}:due")
    await index.client.delete(index.key)
    await index.add(runs)
    return index


def hot_hits() -> float:
    return metrics.hot_index_events_total.labels("hit")._value.get()


async def test_hot_path_claims_the_same_set_as_the_scan(settings: Settings, pool: asyncpg.Pool) -> None:
    rnd = random.Random(7)
    rows: list[asyncpg.Record] = []
    async with pool.acquire() as conn:
        now = await conn.fetchval("SELECT now()")
        for t in range(8):  # tenants whose runs interleave in time
            rows += await factories.runs(
                conn,
                rnd.randint(20, 60),
                tenant_id=f"t{t}",
                start=now - timedelta(minutes=5, milliseconds=rnd.randint(0, 5000)),
                step=timedelta(milliseconds=rnd.randint(900, 1100)),
            )
        # One tenant far behind: batches it crowds must still honour the per-tenant cap.
        rows += await factories.runs(conn, 40, tenant_id="big", start=now - timedelta(hours=2))
    s = hot_settings(settings, batch_size=40, per_tenant_cap=10)
    index = await seeded_index(s, rows)
    dispatcher = Dispatcher(s, pool, None, index)  # type: ignore[arg-type]  # claims only, no publish
    hits_before = hot_hits()
    try:
        claimed_total = 0
        while claimed_total < len(rows):
            async with pool.acquire() as conn:
                floor, db_now = await repo.claim_floor(conn)
                tr = conn.transaction()
                await tr.start()
                scan = await repo.claim_due_runs(
                    conn,
                    floor=floor,
                    ceiling=db_now + timedelta(seconds=5),
                    per_tenant_cap=10,
                    batch_size=40,
                    owner="scan",
                    lease_seconds=30,
                )
                await tr.rollback()
                dispatcher.claims.last_scan = time.monotonic()  # the hot path's turn, not the periodic scan's
                hot = await dispatcher.claims.claim(conn)
            # The hot path takes the oldest due runs it was hinted: a prefix, oldest first, of what the
            # scan takes. Stale hints (runs the scan already took) only make its batch shorter.
            oldest_of_scan = sorted(scan, key=lambda r: (r["due_at"], r["id"]))[: len(hot)]
            assert hot and {r["id"] for r in hot} == {r["id"] for r in oldest_of_scan}
            claimed_total += len(hot)
        assert hot_hits() - hits_before > len(rows) / 3  # once "big" stops crowding, hints serve
    finally:
        await index.close()


async def test_an_unhinted_more_urgent_run_sends_the_hot_path_to_the_scan(
    settings: Settings, pool: asyncpg.Pool
) -> None:
    """Redis orders hints by due time alone: a due priority-0 run that was never hinted must still
    be claimed before the hinted priority-9 ones."""
    async with pool.acquire() as conn:
        now = await conn.fetchval("SELECT now()")
        bulk = await factories.runs(conn, 30, tenant_id="bulk", priority=9, start=now - timedelta(minutes=5))
        urgent = await factories.runs(conn, 5, tenant_id="vip", priority=0, start=now - timedelta(seconds=5))
    s = hot_settings(settings, batch_size=10, per_tenant_cap=100)
    index = await seeded_index(s, bulk)  # the urgent runs' hints were lost
    dispatcher = Dispatcher(s, pool, None, index)  # type: ignore[arg-type]  # claims only, no publish
    try:
        async with pool.acquire() as conn:
            dispatcher.claims.last_scan = time.monotonic()  # the hot path's turn
            claimed = await dispatcher.claims.claim(conn)
    finally:
        await index.close()
    assert {r["id"] for r in urgent} <= {r["id"] for r in claimed} and len(claimed) == 10


async def test_flushdb_mid_drain_loses_nothing(settings: Settings, pool: asyncpg.Pool) -> None:
    n = 2000
    async with pool.acquire() as conn:
        rows = []
        for t in range(4):
            rows += await factories.runs(conn, n // 4, tenant_id=f"t{t}")
    s = hot_settings(settings, batch_size=100, per_tenant_cap=100)
    index = await seeded_index(s, rows)
    nc = await nats.connect(s.nats_url)
    js = nc.jetstream()
    await ensure_stream(js, s)
    stop = asyncio.Event()
    engine = asyncio.create_task(Dispatcher(s, pool, nc, index).run(stop))
    try:
        await eventually(
            lambda: published_runs(js, s.stream), until=lambda m: m >= n // 4, interval=0.01, timeout=30
        )
        await index.client.flushdb()  # mid-drain: every hint gone
        await eventually(lambda: published_runs(js, s.stream), until=lambda m: m >= n, timeout=15)
    finally:
        stop.set()
        await engine
        await nc.close()
        await index.close()
    async with pool.acquire() as conn:
        counts = dict(await conn.fetch("SELECT status, count(*) FROM job_runs GROUP BY 1"))
        epochs = await conn.fetchval("SELECT max(epoch) FROM job_runs")
    assert counts == {"dispatched": n} and epochs == 1


async def test_a_stale_hint_is_never_claimed_twice(settings: Settings, pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        [run] = await factories.runs(conn, 1)
        s = hot_settings(settings)
        index = await seeded_index(s, [run])
        dispatcher = Dispatcher(s, pool, None, index)  # type: ignore[arg-type]
        dispatcher.claims.last_scan = time.monotonic()
        [first] = await dispatcher.claims.claim(conn)  # via the hint
        assert first["epoch"] == 1
        await index.add([run])  # the same hint again: stale now
        dispatcher.claims.last_scan = time.monotonic()
        # The stale hint matches nothing; the claim falls back to a scan that finds nothing.
        assert await dispatcher.claims.claim(conn) == []
        assert await index.client.zcard(index.key) == 0  # a stale hint is dropped, not put back
        row = await conn.fetchrow("SELECT status, epoch FROM job_runs")
    await index.close()
    assert (row["status"], row["epoch"]) == ("dispatched", 1)


async def test_redis_down_never_stops_dispatch(settings: Settings, pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        await factories.runs(conn, 50)
        s = hot_settings(settings)
        dead = HotIndex("redis://127.0.0.1:1/0", "nowhere")  # nothing listens on port 1
        dispatcher = Dispatcher(s, pool, None, dead)  # type: ignore[arg-type]
        dispatcher.claims.last_scan = time.monotonic()
        claimed = await dispatcher.claims.claim(conn)
    await dead.close()
    assert len(claimed) == 50


async def test_runs_made_pending_reach_the_index_through_the_domain_event(
    settings: Settings, tenant: dict[str, Any]
) -> None:
    """No route or service hands the index anything: the API's runtime subscribes it to
    app.pending.runs_pending, which the submission publishes after its commit."""
    s = hot_settings(settings)
    index = await seeded_index(s, [])  # empty
    try:
        async with api_client(s) as hot_api:
            r = await hot_api.post("/tenants/acme/runs", json={"job": "hello"}, headers=tenant["auth"])
            assert r.status_code == 201, r.text
            await eventually(lambda: index.client.zscore(index.key, r.json()["id"]), what="the run's hint")
        before = await index.client.zcard(index.key)
        await pending.runs_pending([{"id": "not-hinted", "due_at": datetime.now(UTC)}])
        assert await index.client.zcard(index.key) == before  # the runtime closed: unsubscribed
    finally:
        await index.close()
