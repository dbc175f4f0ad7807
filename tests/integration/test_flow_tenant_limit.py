"""A tenant's max_in_flight (issue 17): at no moment do more than n of its runs hold an in-flight
slot, under several engines and workers, whatever jobs they belong to; a run of a limited job in a
limited tenant holds both slots; the slot is freed by the fenced transition that ends the attempt
(or the reaper's rescue), exactly once. PATCH /tenants/{id} sets it (admin only)."""

from __future__ import annotations

import asyncio
import uuid
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import nats
import pytest

from app.config import Settings
from app.db import cron as cron_repo
from app.db import flow as flow_repo
from app.db import runs as runs_repo
from app.db import transitions
from app.db.transitions import Fence
from app.engine.claims import claim_scan
from app.engine.engine import Engine
from app.engine.floor import ClaimBounds
from app.engine.keeper import FlowKeeper
from app.services import flow as flow_service
from app.services.dashboard import why_late
from app.worker.consumer import Worker
from tests.integration.test_flow_concurrency import most_at_once, start_then_die
from tests.integration.test_flow_pause import read
from tests.integration.test_run_history import Outcome
from tests.receiver import Call, running_receiver
from tests.support import bearer, create_tenant, put_job, run_reaching, snapshot, submit_run

LIVE = "SELECT count(*) FROM job_runs WHERE tenant_id = $1 AND status IN ('dispatched', 'running')"
TENANT_HOLDERS = "SELECT count(*) FROM concurrency_holders WHERE tenant_id = $1 AND job = ''"


async def limit(api: httpx.AsyncClient, admin: dict, tenant_id: str, n: int | None) -> dict:
    r = await api.patch(f"/tenants/{tenant_id}", json={"max_in_flight": n}, headers=admin)
    assert r.status_code == 200, r.text
    return dict(r.json())


async def claim(pool: asyncpg.Pool, settings: Settings) -> list[asyncpg.Record]:
    async with pool.acquire() as conn:
        return list(await claim_scan(conn, settings, ClaimBounds()))


async def test_a_limited_tenant_never_runs_more_than_n_beside_an_unlimited_one(
    api: httpx.AsyncClient, tenant: dict, admin: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    other = await create_tenant(api, "other")
    other_auth = bearer(other["api_key"])
    fast = settings.model_copy(update={"keeper_interval_seconds": 0.05, "poll_interval_seconds": 0.05})
    stop = asyncio.Event()
    connections = [await nats.connect(settings.nats_url) for _ in range(4)]
    assert (await limit(api, admin, "acme", 2))["in_flight"] == 0
    async with running_receiver() as receiver:
        target = {"type": "http", "url": receiver.url}
        # Two jobs of the limited tenant, one with a limit of its own (3, more than the tenant's):
        # the tenant's slot binds across both.
        await put_job(api, "acme", "slow", auth, target=target)
        await put_job(api, "acme", "keyed", auth, target=target, concurrency={"limit": 3})
        await put_job(api, "other", "slow", other_auth, target=target)
        acme = [
            await submit_run(api, "acme", auth, job=job, payload={"t": "acme", "sleep": 0.25, "n": i})
            for i in range(6)
            for job in ("slow", "keyed")
        ]
        assert {r["held"] for r in acme} == {"concurrency"}
        others = [
            await submit_run(api, "other", other_auth, job="slow", payload={"t": "other", "sleep": 0.25})
            for _ in range(12)
        ]
        assert {r["held"] for r in others} == {None}  # an unlimited tenant's runs are due as before
        tasks = [asyncio.create_task(Engine(fast, pool, nc).run(stop)) for nc in connections[:2]]
        tasks += [asyncio.create_task(Worker(fast, pool, nc).run(stop)) for nc in connections[2:]]
        samples: list[tuple[int, int]] = []

        async def sample() -> None:
            while not stop.is_set():
                samples.append(
                    (await pool.fetchval(LIVE, "acme"), await pool.fetchval(TENANT_HOLDERS, "acme"))
                )
                await asyncio.sleep(0.02)

        sampler = asyncio.create_task(sample())
        try:
            seen = []
            for _ in range(10):
                seen.append((await api.get("/tenants/acme", headers=admin)).json()["in_flight"])
                await asyncio.sleep(0.1)
            for run in others:
                done = await run_reaching(
                    api, str(run["id"]), other_auth, {"succeeded", "failed"}, timeout=60
                )
                assert done["status"] == "succeeded", done
            for run in acme:
                done = await run_reaching(api, str(run["id"]), auth, {"succeeded", "failed"}, timeout=60)
                assert done["status"] == "succeeded", done
        finally:
            stop.set()
            await asyncio.gather(sampler, *tasks)
            for nc in connections:
                await nc.close()
        by_tenant: dict[str, list[Call]] = defaultdict(list)
        for call in receiver.calls:
            by_tenant[call.payload["t"]].append(call)
    assert {t: len(c) for t, c in by_tenant.items()} == {"acme": 12, "other": 12}
    assert most_at_once(by_tenant["acme"]) == 2
    assert most_at_once(by_tenant["other"]) > 2  # the other tenant is not held to acme's limit
    assert samples and max(live for live, _ in samples) <= 2 and max(held for _, held in samples) <= 2
    assert max(seen) <= 2
    assert await pool.fetchval("SELECT count(*) FROM concurrency_holders") == 0
    shown = (await api.get("/tenants/acme", headers=admin)).json()
    assert shown.keys() == {"id", "created_at", "paused", "max_in_flight", "in_flight"}
    assert (shown["id"], shown["paused"], shown["max_in_flight"], shown["in_flight"]) == ("acme", False, 2, 0)


async def test_setting_the_limit_holds_pending_runs_and_counts_running_ones_lowering_kills_nothing(
    api: httpx.AsyncClient, tenant: dict, admin: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    now = datetime.now(UTC)
    runs = [
        await submit_run(
            api, "acme", auth, job="hello", scheduled_at=(now - timedelta(seconds=60 - s)).isoformat()
        )
        for s in range(5)
    ]
    [first] = [r for r in await claim(pool, settings.model_copy(update={"batch_size": 1}))]
    assert str(first["id"]) == runs[0]["id"]
    # Set on a tenant with one run dispatched and four due: the dispatched one counts, the others wait.
    assert (await limit(api, admin, "acme", 2))["in_flight"] == 1
    for run in runs[1:]:
        assert (await read(api, run["id"], auth))["held"] == "concurrency"
    async with pool.acquire() as conn:  # what scheduler_held_runs{reason} reads
        assert (await flow_repo.count_held_runs(conn, 100))["concurrency"] == 4
    assert await claim(pool, settings) == []
    keeper = FlowKeeper(settings, pool)
    assert await keeper.step() == 1 and await keeper.step() == 0  # one free slot of two
    [second] = await claim(pool, settings)
    assert str(second["id"]) == runs[1]["id"]  # the oldest waiting
    # Lowered below what is in flight: nothing is stopped, nothing new is granted.
    lowered = await limit(api, admin, "acme", 1)
    assert lowered["max_in_flight"] == 1 and lowered["in_flight"] == 2
    assert await keeper.step() == 0
    async with pool.acquire() as conn:
        fence = Fence([(first["id"], first["scheduled_at"], first["epoch"])])
        assert await transitions.start_runs(conn, fence, [False], owner="w1", lease_seconds=30)
        assert len(await transitions.finish_runs(conn, fence, [Outcome(True, outcome="succeeded")])) == 1
    assert await keeper.step() == 0  # one in flight, limit one
    # Removed: the waiting runs are released, in their order; the tenant's slot is no longer counted.
    removed = await limit(api, admin, "acme", None)
    assert removed["max_in_flight"] is None and removed["in_flight"] is None
    assert await keeper.step() == 3
    released = await claim(pool, settings)
    assert sorted(str(r["id"]) for r in released) == sorted(r["id"] for r in runs[2:])
    # ... due when they would have been (their order kept: the claim takes the oldest first).
    assert {str(r["id"]): r["due_at"] for r in released} == {
        r["id"]: datetime.fromisoformat(r["due_at"]) for r in runs[2:]
    }
    assert await pool.fetchval(TENANT_HOLDERS, "acme") == 0
    # A run submitted now is due at once, with no key: the unlimited tenant pays nothing.
    late = await submit_run(api, "acme", auth, job="hello")
    assert late["held"] is None
    assert await pool.fetchval("SELECT concurrency_key FROM job_runs WHERE id = $1", late["id"]) is None


async def test_a_run_holds_its_job_slot_and_its_tenant_slot_and_the_reaper_frees_both_once(
    api: httpx.AsyncClient, tenant: dict, admin: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    await limit(api, admin, "acme", 1)
    await put_job(api, "acme", "one", auth, concurrency={"limit": 2}, backoff_seconds=0)
    first, second = [await submit_run(api, "acme", auth, job="one") for _ in range(2)]
    keeper = FlowKeeper(settings, pool)
    assert await keeper.step() == 1 and await keeper.step() == 0  # the job has room, the tenant not
    holders = await pool.fetch("SELECT run_id, job FROM concurrency_holders ORDER BY job")
    assert [(str(h["run_id"]), h["job"]) for h in holders] == [(first["id"], ""), (first["id"], "one")]
    assert (await api.get("/tenants/acme/jobs/one", headers=auth)).json()["in_flight"] == 1
    [claimed] = await claim(pool, settings)
    old = await start_then_die(pool, settings, claimed)  # the reaper rescues the dead worker's run
    assert await pool.fetchval("SELECT count(*) FROM concurrency_holders") == 0
    assert (await read(api, first["id"], auth))["held"] == "concurrency"
    assert await keeper.step() == 1
    holders = await pool.fetch("SELECT run_id, job FROM concurrency_holders")
    assert len(holders) == 2 and len({h["run_id"] for h in holders}) == 1
    async with pool.acquire() as conn:
        # The dead worker's late finish matches nothing and frees nothing.
        assert await transitions.finish_runs(conn, old, [Outcome(True, outcome="succeeded")]) == []
    assert await pool.fetch("SELECT run_id, job FROM concurrency_holders") == holders
    assert await keeper.step() == 0
    assert str(holders[0]["run_id"]) in {first["id"], second["id"]}
    # Cancelling the granted run (not yet claimed) frees both of its slots; the other run gets them.
    granted = str(holders[0]["run_id"])
    assert (await api.post(f"/runs/{granted}/cancel", headers=auth)).status_code == 200
    assert await keeper.step() == 1
    assert (await api.get("/tenants/acme", headers=admin)).json()["in_flight"] == 1


async def still_waiting(task: asyncio.Task[Any]) -> bool:
    """Whether `task` is still blocked after a moment: long enough for a statement that does not
    wait on a lock to finish many times over."""
    await asyncio.sleep(0.5)
    return not task.done()


async def test_a_limit_set_while_a_submission_is_in_flight_waits_for_it_and_holds_its_run(
    api: httpx.AsyncClient, tenant: dict, admin: dict, pool: asyncpg.Pool
) -> None:
    """The submission read the tenant before the limit existed; the PATCH holds the tenant's pending
    runs in its own statement. Unless the PATCH waits for the submission's commit, that statement
    misses the run, which then stays unheld and keyless: claimable beyond the limit."""
    async with pool.acquire() as conn:
        submission = conn.transaction()
        await submission.start()
        [run] = await runs_repo.insert_runs(
            conn, "acme", ["hello"], [None], [{}], [None], [None], None, [None]
        )
        assert run["held"] is None  # the tenant is not limited yet
        patch = asyncio.create_task(limit(api, admin, "acme", 1))
        assert await still_waiting(patch), "the PATCH did not wait for the submission in flight"
        await submission.commit()
    assert (await patch)["max_in_flight"] == 1
    held = await pool.fetchrow("SELECT held, concurrency_key FROM job_runs WHERE id = $1", run["id"])
    assert (held["held"], held["concurrency_key"]) == ("concurrency", "")


@pytest.mark.parametrize("change", ["max_in_flight", "tenant pause", "job pause"])
async def test_a_submission_during_a_flow_change_waits_for_it_and_is_held(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool, change: str
) -> None:
    """A submission that comes while a change of the tenant's max_in_flight, of its pause or of its
    job's pause is being written waits for its commit and is held by it; another tenant's
    submission does not wait."""
    other = await create_tenant(api, "other")
    other_auth = {"Authorization": f"Bearer {other['api_key']}"}
    await put_job(api, "other", "hello", other_auth)
    async with pool.acquire() as conn:
        patch = conn.transaction()
        await patch.start()
        # What each change's service does in its transaction, stopped before the commit.
        if change == "tenant pause":
            assert await flow_repo.set_tenant_paused(conn, "acme", True)
            await flow_service.apply_pause(conn, "acme", None, True)
        elif change == "job pause":
            assert await flow_repo.set_job_paused(conn, "acme", "hello", True) is not None
            await flow_service.apply_pause(conn, "acme", "hello", True)
        else:
            await flow_service.apply_max_in_flight(conn, "acme", 1)
        submission = asyncio.create_task(submit_run(api, "acme", tenant["auth"], job="hello"))
        # The tenant's flow lock is the tenant's own: others submit meanwhile.
        bystander = await asyncio.wait_for(submit_run(api, "other", other_auth, job="hello"), 5)
        assert bystander["held"] is None
        assert await still_waiting(submission), "the submission did not wait for the change in flight"
        await patch.commit()
    run = await submission
    assert run["held"] == ("concurrency" if change == "max_in_flight" else "paused"), run


async def test_patch_is_admin_only_and_refuses_what_it_cannot_store(
    api: httpx.AsyncClient, tenant: dict, admin: dict, pool: asyncpg.Pool
) -> None:
    await submit_run(api, "acme", tenant["auth"], job="hello")  # a run a stray write would hold
    before = await snapshot(pool)
    assert (await api.patch("/tenants/acme", json={"max_in_flight": 2})).status_code == 401
    # A tenant key learns nothing of the admin surface: 404, as for every admin route.
    r = await api.patch("/tenants/acme", json={"max_in_flight": 2}, headers=tenant["auth"])
    assert r.status_code == 404, r.text
    assert (await api.get("/tenants/acme", headers=tenant["auth"])).status_code == 404
    for body, field in [
        ({"max_in_flight": 0}, "max_in_flight"),
        ({"max_in_flight": -1}, "max_in_flight"),
        ({"max_in_flight": "3"}, "max_in_flight"),
        ({"max_in_flight": 2.5}, "max_in_flight"),
        ({"max_in_flight": 3.0}, "max_in_flight"),  # strict, as priority: a count is an integer
        ({"max_in_flight": True}, "max_in_flight"),
        ({"max_in_flight": 10**12}, "max_in_flight"),
        ({}, "max_in_flight"),
        ({"max_in_flight": 2, "max_inflight": 3}, "max_inflight"),
    ]:
        r = await api.patch("/tenants/acme", json=body, headers=admin)
        assert r.status_code == 422, (body, r.text)
        assert r.headers["content-type"].startswith("application/problem+json")
        assert r.json()["field"] == field, (body, r.text)
    r = await api.patch("/tenants/nobody", json={"max_in_flight": 2}, headers=admin)
    assert r.status_code == 404 and r.json()["field"] == "tenant_id", r.text
    assert (await api.get("/tenants/nobody", headers=admin)).status_code == 404
    assert await snapshot(pool) == before  # nothing written, not even the tenant's slot row
    shown = (await api.get("/tenants/acme", headers=admin)).json()
    assert shown["max_in_flight"] is None and shown["in_flight"] is None and shown["paused"] is False


async def test_a_run_that_ended_before_the_limit_waits_for_a_slot_when_retried(
    api: httpx.AsyncClient, tenant: dict, admin: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    run = await submit_run(api, "acme", auth, job="hello")
    assert (await api.post(f"/runs/{run['id']}/cancel", headers=auth)).status_code == 200
    await limit(api, admin, "acme", 1)
    retried = await api.post(f"/runs/{run['id']}/retry", headers=auth)
    assert retried.status_code == 200, retried.text
    assert retried.json()["held"] == "concurrency" and retried.json()["status"] == "pending"
    assert await claim(pool, settings) == []
    assert await FlowKeeper(settings, pool).step() == 1
    assert [str(r["id"]) for r in await claim(pool, settings)] == [run["id"]]


async def test_a_rate_limited_run_of_a_limited_tenant_takes_the_tenant_slot_too(
    api: httpx.AsyncClient, tenant: dict, admin: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    """The window lets three start, the tenant one: one is granted, holding the tenant's slot, and
    the next waits for that slot, not for the window."""
    auth = tenant["auth"]
    await limit(api, admin, "acme", 1)
    await put_job(api, "acme", "paced", auth, rate_limit={"limit": 3, "period_seconds": 60})
    runs = [await submit_run(api, "acme", auth, job="paced") for _ in range(3)]
    assert {r["held"] for r in runs} == {"rate_limit"}
    keeper = FlowKeeper(settings, pool)
    assert await keeper.step() == 1 and await keeper.step() == 0
    assert (await api.get("/tenants/acme", headers=admin)).json()["in_flight"] == 1
    [claimed] = await claim(pool, settings)
    assert str(claimed["id"]) == runs[0]["id"]
    async with pool.acquire() as conn:
        fence = Fence([(claimed["id"], claimed["scheduled_at"], claimed["epoch"])])
        assert await transitions.start_runs(conn, fence, [False], owner="w1", lease_seconds=30)
        assert len(await transitions.finish_runs(conn, fence, [Outcome(True, outcome="succeeded")])) == 1
    assert await pool.fetchval(TENANT_HOLDERS, "acme") == 0
    assert await keeper.step() == 1  # the window still has room: the freed tenant slot decides


async def test_the_dashboard_says_a_run_waits_for_its_tenants_max_in_flight(
    api: httpx.AsyncClient, tenant: dict, admin: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    now = await pool.fetchval("SELECT now()")
    past, later = (now - timedelta(seconds=30)).isoformat(), (now - timedelta(seconds=20)).isoformat()
    await limit(api, admin, "acme", 1)
    await put_job(api, "acme", "keyed", auth, concurrency={"limit": 5})
    plain = [await submit_run(api, "acme", auth, job="hello", scheduled_at=past) for _ in range(2)]
    # Due after the plain runs, so the tenant's one slot goes to a plain run (oldest first).
    keyed = await submit_run(api, "acme", auth, job="keyed", scheduled_at=later)
    assert await FlowKeeper(settings, pool).step() == 1  # the tenant's one slot
    waiting = [r for r in plain if (await read(api, r["id"], auth))["held"] == "concurrency"]
    assert len(waiting) == 1
    late = await why_late(pool, uuid.UUID(str(waiting[0]["id"])), "acme", 1000)
    assert late is not None and late.reasons[0].startswith(
        "Held by its tenant's max_in_flight: 1 in flight of 1"
    )
    late = await why_late(pool, uuid.UUID(str(keyed["id"])), "acme", 1000)
    assert late is not None and late.reasons[0].startswith("Held by its job's concurrency limit: 0 in flight")
    assert late.reasons[1] == "Its tenant's max_in_flight applies too: 1 in flight of 1."


async def test_a_pause_while_cron_materializes_its_job_waits_and_holds_the_new_runs(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    """The cron materializer holds its job's row while it inserts the job's runs under the tenant's
    flow lock (shared); a pause writes the job's row, then takes that lock. Taken in the other order,
    each would wait for the other: Postgres would abort one as a deadlock."""
    await put_job(api, "acme", "every", tenant["auth"], schedule="* * * * *")
    async with pool.acquire() as conn:
        materializer = conn.transaction()
        await materializer.start()
        locked = await cron_repo.lock_due_cron_jobs(conn, horizon_seconds=3600, limit=10)
        assert [r["name"] for r in locked] == ["every"]
        pause = asyncio.create_task(api.post("/tenants/acme/jobs/every/pause", headers=tenant["auth"]))
        assert await still_waiting(pause), "the pause did not wait for the job's row"
        [occurrence] = await cron_repo.insert_cron_runs(conn, "acme", "every", [locked[0]["next_fire_at"]])
        await materializer.commit()
    assert (await pause).status_code == 200
    held = await pool.fetchval("SELECT held FROM job_runs WHERE id = $1", occurrence["id"])
    assert held == "paused"
