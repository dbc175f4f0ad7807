"""Concurrency limits (issue 17): at no moment do more than `limit` runs of one key hold a slot,
with several engines and workers; a slot is freed exactly once, by the fenced transition that ends
the attempt (or the reaper's rescue), never by a stale worker's late finish."""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import AsyncIterator

import asyncpg
import httpx
import nats

from app.config import Settings
from app.db import transitions
from app.db.transitions import Fence
from app.engine.claims import claim_scan
from app.engine.engine import Engine
from app.engine.floor import ClaimBounds
from app.engine.keeper import FlowKeeper
from app.engine.reaper import Reaper
from app.worker.consumer import Worker
from tests.integration.test_run_history import Outcome  # a worker's outcome, as finish_runs takes it
from tests.receiver import Call, running_receiver
from tests.support import put_job, run_reaching, submit_run


@contextlib.asynccontextmanager
async def engines_and_workers(settings: Settings, pool: asyncpg.Pool) -> AsyncIterator[None]:
    """Two engines and two workers, each on its own NATS connection, until the block ends."""
    stop = asyncio.Event()
    connections = [await nats.connect(settings.nats_url) for _ in range(4)]
    tasks = [asyncio.create_task(Engine(settings, pool, nc).run(stop)) for nc in connections[:2]]
    tasks += [asyncio.create_task(Worker(settings, pool, nc).run(stop)) for nc in connections[2:]]
    try:
        yield
    finally:
        stop.set()
        await asyncio.gather(*tasks)
        for nc in connections:
            await nc.close()


def most_at_once(calls: list[Call]) -> int:
    """The most requests the receiver held open at the same moment."""
    edges = sorted([(c.started, 1) for c in calls] + [(c.ended or c.started, -1) for c in calls])
    most = open_now = 0
    for _, step in edges:
        open_now += step
        most = max(most, open_now)
    return most


async def start_then_die(pool: asyncpg.Pool, settings: Settings, claimed: asyncpg.Record) -> Fence:
    """Starts the claimed run as worker w1, which then dies: its lease lapses and the reaper rescues
    the run (a retry: attempts left). Returns the dead worker's fence, for its late finish."""
    async with pool.acquire() as conn:
        old = Fence([(claimed["id"], claimed["scheduled_at"], claimed["epoch"])])
        assert await transitions.start_runs(conn, old, [False], owner="w1", lease_seconds=30)
        await conn.execute(
            "UPDATE job_runs SET lease_expires_at = now() - interval '1s' WHERE id = $1", claimed["id"]
        )
    assert await Reaper(settings, pool).step() == 1
    return old


async def test_limit_holds_per_key_across_engines_and_workers(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    fast = settings.model_copy(update={"keeper_interval_seconds": 0.05, "poll_interval_seconds": 0.05})
    async with running_receiver() as receiver:
        job = await put_job(
            api,
            "acme",
            "call",
            auth,
            target={"type": "http", "url": receiver.url},
            concurrency={"limit": 2, "key": "payload.customer"},
        )
        assert job["concurrency"] == {"limit": 2, "key": "payload.customer"} and job["in_flight"] == 0
        runs = [
            await submit_run(api, "acme", auth, job="call", payload={"customer": c, "sleep": 0.3, "n": i})
            for i in range(8)
            for c in ("a", "b")
        ] + [await submit_run(api, "acme", auth, job="call", payload={"sleep": 0.3}) for _ in range(3)]
        assert {r["held"] for r in runs} == {"concurrency"}
        async with engines_and_workers(fast, pool):
            seen_in_flight = 0
            for _ in range(20):
                seen_in_flight = max(
                    seen_in_flight,
                    int((await api.get("/tenants/acme/jobs/call", headers=auth)).json()["in_flight"]),
                )
                await asyncio.sleep(0.1)
            for run in runs:
                done = await run_reaching(api, str(run["id"]), auth, {"succeeded", "failed"}, timeout=60)
                assert done["status"] == "succeeded", done
        by_key: dict[str, list[Call]] = defaultdict(list)
        for call in receiver.calls:
            by_key[str(call.payload.get("customer", ""))].append(call)
    assert {k: len(v) for k, v in by_key.items()} == {"a": 8, "b": 8, "": 3}
    assert {k: most_at_once(v) for k, v in by_key.items()} == {"a": 2, "b": 2, "": 2}
    assert 1 <= seen_in_flight <= 6  # three keys of two slots each
    assert await pool.fetchval("SELECT count(*) FROM concurrency_holders") == 0


async def test_the_reaper_frees_a_slot_once_and_a_late_old_epoch_finish_frees_nothing(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    await put_job(api, "acme", "one", auth, concurrency={"limit": 1}, backoff_seconds=0)
    first, second = [await submit_run(api, "acme", auth, job="one") for _ in range(2)]
    keeper = FlowKeeper(settings, pool)
    assert await keeper.step() == 1 and await keeper.step() == 0  # one slot, one key
    async with pool.acquire() as conn:
        [claimed] = await claim_scan(conn, settings, ClaimBounds())
    assert str(claimed["id"]) == first["id"]
    old = await start_then_die(pool, settings, claimed)
    assert await pool.fetchval("SELECT count(*) FROM concurrency_holders") == 0
    first_now = dict((await api.get(f"/runs/{first['id']}", headers=auth)).json())
    assert first_now["status"] == "pending" and first_now["held"] == "concurrency"
    # The freed slot goes to one waiting run (the oldest due: `second`, or the rescued `first`).
    assert await keeper.step() == 1
    holders = await pool.fetch("SELECT run_id FROM concurrency_holders")
    assert len(holders) == 1
    async with pool.acquire() as conn:
        # The dead worker wakes and reports: fenced on the old epoch and status, it matches nothing
        # and frees nothing: the slot now held by another grant stays held.
        assert await transitions.finish_runs(conn, old, [Outcome(True, outcome="succeeded")]) == []
    assert await pool.fetch("SELECT run_id FROM concurrency_holders") == holders
    assert await keeper.step() == 0
    assert str(holders[0]["run_id"]) in {first["id"], second["id"]}


async def test_cancel_frees_the_slot_and_a_paused_job_gives_its_slots_back(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    await put_job(api, "acme", "one", auth, concurrency={"limit": 1})
    first, second = [await submit_run(api, "acme", auth, job="one") for _ in range(2)]
    keeper = FlowKeeper(settings, pool)
    assert await keeper.step() == 1
    assert (await api.post(f"/runs/{first['id']}/cancel", headers=auth)).status_code == 200
    assert await keeper.step() == 1  # the cancelled run's slot went to the next
    assert (await api.post("/tenants/acme/jobs/one/pause", headers=auth)).json()["in_flight"] == 0
    assert (await api.get(f"/runs/{second['id']}", headers=auth)).json()["held"] == "paused"
    assert await keeper.step() == 0  # a paused job is granted nothing
    resumed = (await api.post("/tenants/acme/jobs/one/resume", headers=auth)).json()
    assert resumed["in_flight"] == 0
    assert (await api.get(f"/runs/{second['id']}", headers=auth)).json()["held"] == "concurrency"
    assert await keeper.step() == 1
    assert (await api.get("/tenants/acme/jobs/one", headers=auth)).json()["in_flight"] == 1


async def test_a_finished_run_sent_back_to_pending_waits_for_a_slot_again(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    """Any transition back to pending (here a failed run retried by hand, as a run operation would)
    re-holds a limited run: it is never claimable without a slot."""
    auth = tenant["auth"]
    await put_job(api, "acme", "one", auth, concurrency={"limit": 1}, max_attempts=1)
    run = await submit_run(api, "acme", auth, job="one")
    assert await FlowKeeper(settings, pool).step() == 1
    async with pool.acquire() as conn:
        [claimed] = await claim_scan(conn, settings, ClaimBounds())
        fence = Fence([(claimed["id"], claimed["scheduled_at"], claimed["epoch"])])
        assert await transitions.start_runs(conn, fence, [False], owner="w1", lease_seconds=30)
        [failed] = await transitions.finish_runs(conn, fence, [Outcome(False, "boom", "failed")])
        assert failed["status"] == "failed"
        assert await conn.fetchval("SELECT count(*) FROM concurrency_holders") == 0
        await conn.execute(
            "UPDATE job_runs SET status = 'pending', due_at = now() WHERE id = $1", claimed["id"]
        )
        assert await claim_scan(conn, settings, ClaimBounds()) == []
    assert (await api.get(f"/runs/{run['id']}", headers=auth)).json()["held"] == "concurrency"
