"""A deadline to start, where runs are handed out (migration 0019): the worker's start ends a run
past its deadline `expired` in the start statement itself (its target never called, a callback on
`expired` delivered), and an expiring run gives back the concurrency slot it was granted, whether
the sweep or the start ends it, and its place in a rate limit's window."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
import httpx
import nats

from app.bus.jetstream import ensure_stream
from app.config import Settings
from app.db import transitions
from app.db.transitions import EXPIRED_ERROR
from app.engine.claims import claim_scan
from app.engine.dispatcher import Dispatcher
from app.engine.expiry import RunExpiry
from app.engine.floor import ClaimBounds
from app.engine.keeper import FlowKeeper
from app.worker.consumer import Worker
from stack.eventually import eventually
from tests import factories
from tests.integration.test_run_expiry import SOON, at, expired_by
from tests.integration.test_run_history import fence_of
from tests.integration.test_start_runs import start_as_worker
from tests.receiver import running_receiver
from tests.support import put_job, run_reaching, submit_run


async def test_the_start_ends_runs_past_their_deadline_and_starts_the_rest(
    settings: Settings, pool: asyncpg.Pool
) -> None:
    async with pool.acquire() as conn:
        await factories.runs(conn, 3)
        await factories.runs(conn, 1, job_name="k")
        claimed = list(await claim_scan(conn, settings, ClaimBounds()))
        late, ahead, plain, paused_late = (r["id"] for r in claimed)
        past, later = datetime.now(UTC) - timedelta(seconds=1), datetime.now(UTC) + timedelta(hours=1)
        await conn.execute(
            "UPDATE job_runs SET expires_at = $2 WHERE id = ANY($1)", [late, paused_late], past
        )
        await conn.execute("UPDATE job_runs SET expires_at = $2 WHERE id = $1", ahead, later)
        await conn.execute("UPDATE jobs SET paused = true WHERE name = 'k'")  # past its deadline wins
        starts = await start_as_worker(conn, fence_of(claimed), [False] * 4, owner="w1", lease_seconds=30)
        assert starts == {late: None, ahead: 1, plain: 1, paused_late: None}
        assert starts.expired == {late, paused_late}
        rows = {r["id"]: r for r in await conn.fetch("SELECT * FROM job_runs")}
        for run in (late, paused_late):
            assert (rows[run]["status"], rows[run]["attempt"], rows[run]["started_at"]) == (
                "expired",
                0,
                None,
            )
            assert (rows[run]["lease_owner"], rows[run]["last_error"]) == (None, EXPIRED_ERROR)
        assert rows[ahead]["status"] == rows[plain]["status"] == "running"
        # Again: nothing matches (each was started or ended once).
        assert await start_as_worker(conn, fence_of(claimed), [False] * 4, owner="w2", lease_seconds=30) == {}


async def test_a_dispatched_run_past_its_deadline_ends_expired_at_its_start_and_is_never_called(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    """Dispatched by an engine, its message waits while no worker runs (and no sweep: the dispatcher
    alone); the worker that comes after the deadline ends it at its start. Its neighbour without a
    deadline runs; the callback on `expired` is delivered with the expired run."""
    auth = tenant["auth"]
    fast = settings.model_copy(update={"callback_poll_seconds": 0.1})
    nc = await nats.connect(fast.nats_url)
    async with running_receiver() as receiver:
        await put_job(
            api,
            "acme",
            "hook",
            auth,
            target={"type": "http", "url": receiver.url},
            callback={"url": receiver.url, "on": ["expired"]},
        )
        late = await submit_run(api, "acme", auth, job="hook", expires_at=at(SOON))
        timely = await submit_run(api, "acme", auth, job="hook")
        await ensure_stream(nc.jetstream(), fast)
        stop = asyncio.Event()
        dispatcher = asyncio.create_task(Dispatcher(fast, pool, nc).run(stop))
        try:
            for run in (late, timely):
                await run_reaching(api, run["id"], auth, {"dispatched"}, timeout=10)
        finally:
            stop.set()
            await dispatcher
        await asyncio.sleep(SOON)
        assert (await api.get(f"/runs/{late['id']}", headers=auth)).json()["status"] == "dispatched"
        before = expired_by("start")
        stop = asyncio.Event()
        worker = asyncio.create_task(Worker(fast, pool, nc).run(stop))
        try:
            assert (await run_reaching(api, timely["id"], auth, {"succeeded", "failed"}))[
                "status"
            ] == "succeeded"
            done = await run_reaching(api, late["id"], auth, {"expired", "running", "succeeded", "failed"})
            assert (done["status"], done["attempt"], done["started_at"]) == ("expired", 0, None)
            [callback] = await eventually(lambda: receiver.callbacks_for(late["id"]), what="the callback")
        finally:
            stop.set()
            await worker
            await nc.close()
        assert receiver.for_run(late["id"]) == [] and len(receiver.for_run(timely["id"])) == 1
        assert callback.envelope["data"]["status"] == "expired"
        assert receiver.callbacks_for(timely["id"]) == []  # it succeeded: not in `on`
        assert expired_by("start") == before + 1


async def holders(pool: asyncpg.Pool) -> set[str]:
    return {str(r["run_id"]) for r in await pool.fetch("SELECT run_id FROM concurrency_holders")}


async def test_an_expiring_run_gives_back_the_slot_it_was_granted(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    """Pending with its slot (ended by the sweep) and dispatched with it (ended by the start): the
    slot goes back and the next run waiting for it is granted. A run still waiting for a slot
    expires too."""
    auth = tenant["auth"]
    keeper, sweep = FlowKeeper(settings, pool), RunExpiry(settings, pool)
    for name in ("one", "two"):
        await put_job(api, "acme", name, auth, concurrency={"limit": 1})
    granted = await submit_run(api, "acme", auth, job="one", expires_at=at(SOON))
    waiting = await submit_run(api, "acme", auth, job="one", expires_at=at(SOON))
    after = await submit_run(api, "acme", auth, job="one")
    sent = await submit_run(api, "acme", auth, job="two", expires_at=at(SOON))
    sent_next = await submit_run(api, "acme", auth, job="two")
    assert await keeper.step() == 2
    assert await holders(pool) == {granted["id"], sent["id"]}
    async with pool.acquire() as conn:
        claimed = list(await claim_scan(conn, settings, ClaimBounds()))
    assert {str(r["id"]) for r in claimed} == {granted["id"], sent["id"]}
    async with pool.acquire() as conn:  # `granted` back to pending, still holding its slot
        await transitions.release_unpublished_runs(
            conn, fence_of([r for r in claimed if str(r["id"]) == granted["id"]])
        )
    await asyncio.sleep(SOON)

    async with pool.acquire() as conn:  # a worker's start comes first for `sent`
        starts = await start_as_worker(
            conn,
            fence_of([r for r in claimed if str(r["id"]) == sent["id"]]),
            [False],
            owner="w",
            lease_seconds=30,
        )
    assert starts.expired == {uuid.UUID(sent["id"])}
    assert await sweep.step() == 2  # `granted` (pending with its slot) and `waiting` (held)
    for run in (granted, waiting, sent):
        assert (await api.get(f"/runs/{run['id']}", headers=auth)).json()["status"] == "expired"
    assert await holders(pool) == set()
    assert await keeper.step() == 2
    assert await holders(pool) == {after["id"], sent_next["id"]}


async def test_an_expiring_run_leaves_its_rate_limit_window_unstarted(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    """A run granted its window's room that never starts, and one still waiting for room, both
    expire; the granted one's place in the window goes back, so the next run is granted at once
    rather than after the hour-long period."""
    auth = tenant["auth"]
    keeper, sweep = FlowKeeper(settings, pool), RunExpiry(settings, pool)
    await put_job(api, "acme", "paced", auth, rate_limit={"limit": 1, "period_seconds": 3600})
    granted = await submit_run(api, "acme", auth, job="paced", expires_at=at(SOON))
    waiting = await submit_run(api, "acme", auth, job="paced", expires_at=at(SOON))
    after = await submit_run(api, "acme", auth, job="paced")
    assert await keeper.step() == 1
    assert (await api.get(f"/runs/{waiting['id']}", headers=auth)).json()["held"] == "rate_limit"
    await asyncio.sleep(SOON)
    assert await sweep.step() == 2
    assert await pool.fetchval("SELECT count(*) FROM rate_limit_starts") == 0
    assert await keeper.step() == 1
    assert (await api.get(f"/runs/{after['id']}", headers=auth)).json()["held"] is None
    assert {
        (await api.get(f"/runs/{r['id']}", headers=auth)).json()["status"] for r in (granted, waiting)
    } == {"expired"}
