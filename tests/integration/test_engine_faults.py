"""Engine faults: NATS lost mid-drain, an engine killed between claim and publish, lapsed leases."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import asyncpg
import nats
import pytest

from app.bus.jetstream import ensure_stream
from app.config import Settings
from app.dev import EmbeddedNats
from app.engine.dispatcher import Dispatcher
from app.engine.reaper import Reaper
from stack.dispatch import dispatch_once
from stack.eventually import eventually
from tests import factories
from tests.support import stream_runs


async def statuses(pool: asyncpg.Pool) -> dict[str, int]:
    async with pool.acquire() as conn:
        return {
            r["status"]: r["n"]
            for r in await conn.fetch("SELECT status, count(*) AS n FROM job_runs GROUP BY 1")
        }


async def test_nats_lost_mid_drain_loses_nothing(
    settings: Settings, pool: asyncpg.Pool, tmp_path: Path
) -> None:
    """NATS is stopped while the engine drains: unacked runs go back to pending at once, and all are
    dispatched once NATS returns. A run may be published twice, but never twice in one epoch."""
    server = EmbeddedNats(tmp_path / "nats")
    url = server.start()
    n = 4000
    async with pool.acquire() as conn:
        await factories.runs(conn, n)
    s = settings.model_copy(update={"nats_url": url, "batch_size": 100, "publish_timeout_seconds": 1.0})
    nc = await nats.connect(url, max_reconnect_attempts=-1, reconnect_time_wait=0.2)
    js = nc.jetstream()
    await ensure_stream(js, s)
    stop = asyncio.Event()
    engine = asyncio.create_task(Dispatcher(s, pool, nc).run(stop))
    try:
        try:
            await eventually(
                lambda: statuses(pool),
                until=lambda c: c.get("dispatched", 0) >= n // 4,
                interval=0.01,
                timeout=30,
            )
            server.stop()  # mid-drain
            await asyncio.sleep(2.5)  # publishes time out and are released
            during = await statuses(pool)
            server.start()
            await eventually(
                lambda: statuses(pool), until=lambda c: c.get("dispatched", 0) == n, interval=0.1, timeout=30
            )
        finally:
            stop.set()
            await engine
        # Every run was dispatched, but a batch's PubAck may still have been on its way at the stop:
        # the graceful stop put that batch back to pending. The next engine sends it; here, by hand.
        while await dispatch_once(Dispatcher(s, pool, nc)):
            pass
    finally:
        await nc.close()
    assert during.get("pending", 0) > 0  # the outage left work pending, not stuck as dispatched
    assert await statuses(pool) == {"dispatched": n}
    ids = await stream_runs(url, s)
    server.stop()
    runs = {i.split(":")[0] for i in ids}
    assert len(runs) == n  # every run reached the stream
    assert len(ids) == len(set(ids))  # and no (run, epoch) twice


ENGINE_THAT_DIES = textwrap.dedent(
    """
    import asyncio, os, signal, sys
    from app.db import transitions as dispatch
    from app.db.connection import connect

    async def main():
        conn = await connect(sys.argv[1])
        floor, now = await dispatch.claim_floor(conn)
        rows = await dispatch.claim_due_runs(conn, floor=floor, ceiling=now, per_tenant_cap=100, batch_size=100,
                                             owner="doomed", lease_seconds=1.0)
        print(len(rows), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)  # between claim and publish

    asyncio.run(main())
    """
)


async def test_engine_killed_between_claim_and_publish(settings: Settings, pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        [run] = await factories.runs(conn, 1)
    proc = subprocess.run(
        [sys.executable, "-c", ENGINE_THAT_DIES, settings.database_url],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == -signal.SIGKILL and proc.stdout.strip() == "1", proc.stderr
    async with pool.acquire() as conn:
        row = await conn.fetchrow("SELECT status, epoch, lease_owner FROM job_runs")
    assert (row["status"], row["epoch"], row["lease_owner"]) == ("dispatched", 1, "doomed")

    nc = await nats.connect(settings.nats_url)
    js = nc.jetstream()
    await ensure_stream(js, settings)
    await asyncio.sleep(1.2)  # the claim lease lapses
    assert await Reaper(settings, pool).step() == 1
    assert await dispatch_once(Dispatcher(settings, pool, nc)) == 1
    await nc.close()
    async with pool.acquire() as conn:
        row = await conn.fetchrow("SELECT status, epoch, attempt FROM job_runs")
    assert (row["status"], row["epoch"], row["attempt"]) == ("dispatched", 2, 0)  # no attempt consumed
    assert await stream_runs(settings.nats_url, settings) == [f"{run['id']}:2"]


async def test_reaper_rescues_lapsed_leases(settings: Settings, pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        await factories.runs(conn, 3, tenant_id="a", max_attempts=3)
        await factories.runs(conn, 2, tenant_id="b", max_attempts=1)
        # a: dispatched and lapsed; b: running, last attempt, heartbeat lapsed.
        await conn.execute(
            "UPDATE job_runs SET status = 'dispatched', epoch = 1, lease_expires_at = now() - interval '1 s' "
            "WHERE tenant_id = 'a'"
        )
        await conn.execute(
            "UPDATE job_runs SET status = 'running', epoch = 1, attempt = 1, lease_expires_at = now() - interval '1 s' "
            "WHERE tenant_id = 'b'"
        )
        await factories.runs(conn, 1, tenant_id="c", max_attempts=3)
        await conn.execute(
            "UPDATE job_runs SET status = 'running', epoch = 1, attempt = 1, lease_expires_at = now() - interval '1 s' "
            "WHERE tenant_id = 'c'"
        )
    assert await Reaper(settings, pool).step() == 6
    async with pool.acquire() as conn:
        rows = {r["tenant_id"]: r for r in await conn.fetch("SELECT DISTINCT ON (tenant_id) * FROM job_runs")}
    assert (rows["a"]["status"], rows["a"]["attempt"]) == ("pending", 0)
    assert rows["b"]["status"] == "failed" and "lease expired" in rows["b"]["last_error"]
    assert (
        rows["c"]["status"] == "pending"
        and rows["c"]["attempt"] == 1
        and rows["c"]["due_at"] > rows["c"]["scheduled_at"]
    )
    assert await Reaper(settings, pool).step() == 0


async def test_a_due_run_wakes_an_idle_engine(settings: Settings, pool: asyncpg.Pool, api, tenant) -> None:
    """With a one-minute poll, only the NOTIFY of the submission can have woken the engine."""
    s = settings.model_copy(update={"poll_interval_seconds": 60.0})
    nc = await nats.connect(s.nats_url)
    js = nc.jetstream()
    await ensure_stream(js, s)
    stop = asyncio.Event()
    engine = asyncio.create_task(Dispatcher(s, pool, nc).run(stop))
    try:
        await asyncio.sleep(0.5)  # the engine has polled once and now sleeps
        run = (await api.post("/tenants/acme/runs", json={"job": "hello"}, headers=tenant["auth"])).json()
        for _ in range(50):
            got = (await api.get(f"/runs/{run['id']}", headers=tenant["auth"])).json()
            if got["status"] == "dispatched":
                break
            await asyncio.sleep(0.1)
        assert got["status"] == "dispatched"
    finally:
        stop.set()
        await engine
        await nc.close()


@pytest.mark.parametrize("runs_a_message", [1, 5])
async def test_engine_pauses_while_workers_are_behind(
    settings: Settings, pool: asyncpg.Pool, runs_a_message: int
) -> None:
    """Backpressure: with the workers' queue past max_queued_messages, runs stay pending. It used to
    admit one batch too many on a slower machine (150, issue 13): the consumer's num_pending counts a
    message a moment after its PubAck, and the batch whose PubAcks were still out was not counted."""
    from app.bus.jetstream import ensure_consumer

    async with pool.acquire() as conn:
        await factories.runs(conn, 1000)
    s = settings.model_copy(
        update={"batch_size": 50, "max_queued_messages": 100, "message_runs": runs_a_message}
    )
    nc = await nats.connect(s.nats_url)
    js = nc.jetstream()
    await ensure_consumer(js, s)  # a consumer exists, but no worker drains it
    stop = asyncio.Event()
    engine = asyncio.create_task(Dispatcher(s, pool, nc).run(stop))
    try:
        await asyncio.sleep(3)
    finally:
        stop.set()
        await engine
    messages = (await js.stream_info(s.stream)).state.messages
    await nc.close()
    counts = await statuses(pool)
    # Claims stop once the queue reaches the bound, in messages (give or take the batch that crossed
    # it); a message carries `runs_a_message` runs of the one tenant.
    assert 100 <= messages < 100 + 50 // runs_a_message
    assert counts["dispatched"] == messages * runs_a_message
    assert counts["pending"] == 1000 - counts["dispatched"]
