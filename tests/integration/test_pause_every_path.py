"""A pause holds on every path into pending, in the statement that takes it there (migration 0018):
a tenant's retry (one run or in bulk), the admin's tenant pause under that retry, a reschedule, the
reaper's rescues, a publish that failed, an attempt that failed with attempts left. The claim never
takes a run of a paused job or tenant, and a worker's start refuses one (back to pending, held, no
attempt consumed), so a pause reaches runs already dispatched. Each beside a tenant left alone."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
import httpx

from app.config import Settings
from app.db import transitions
from app.engine.claims import claim_scan
from app.engine.floor import ClaimBounds
from app.engine.keeper import FlowKeeper
from app.engine.reaper import Reaper
from tests.integration.test_run_history import Outcome, fence_of
from tests.integration.test_start_runs import start_as_worker
from tests.support import bearer, create_tenant, put_job, submit_run

WORKER = "w1"


async def claim_all(pool: asyncpg.Pool, settings: Settings) -> list[asyncpg.Record]:
    async with pool.acquire() as conn:
        return list(await claim_scan(conn, settings, ClaimBounds()))


async def start(pool: asyncpg.Pool, claimed: list[asyncpg.Record]) -> set[uuid.UUID]:
    async with pool.acquire() as conn:
        started = await start_as_worker(
            conn, fence_of(claimed), [False] * len(claimed), owner=WORKER, lease_seconds=30
        )
    return {run for run, attempt in started.items() if attempt is not None}


async def row(pool: asyncpg.Pool, run_id: object) -> asyncpg.Record:
    found = await pool.fetchrow(
        "SELECT status, held, attempt, epoch, due_at, held_due_at FROM job_runs WHERE id = $1",
        uuid.UUID(str(run_id)),
    )
    assert found is not None
    return found


async def neighbour(api: httpx.AsyncClient) -> dict[str, str]:
    """The well-behaved tenant beside the paused one, with a job of its own."""
    other = await create_tenant(api, "other")
    auth = bearer(other["api_key"])
    await put_job(api, "other", "hello", auth)
    return auth


async def lapse_leases(pool: asyncpg.Pool) -> None:
    await pool.execute(
        "UPDATE job_runs SET lease_expires_at = now() - interval '1 second' WHERE lease_expires_at IS NOT NULL"
    )


async def test_a_retry_of_a_paused_jobs_runs_is_held_as_it_is_made(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    auth, other = tenant["auth"], await neighbour(api)
    runs = [await submit_run(api, "acme", auth, job="hello") for _ in range(6)]
    for run in runs:
        assert (await api.post(f"/runs/{run['id']}/cancel", headers=auth)).json()["status"] == "cancelled"
    assert (await api.post("/tenants/acme/jobs/hello/pause", headers=auth)).status_code == 200
    free = await submit_run(api, "other", other, job="hello")

    for run in runs[:3]:  # one by one
        retried = (await api.post(f"/runs/{run['id']}/retry", headers=auth)).json()
        assert (retried["status"], retried["held"]) == ("pending", "paused"), retried
    r = await api.post(
        "/tenants/acme/runs/actions",
        json={"action": "retry", "filter": {"ids": [x["id"] for x in runs[3:]]}},
        headers=auth,
    )
    assert r.status_code == 200 and r.json()["changed"] == 3, r.text
    for run in runs:
        assert (await row(pool, run["id"]))["held"] == "paused"
    # Only the neighbour's run is claimed, though the retries woke the engines.
    assert [r["id"] for r in await claim_all(pool, settings)] == [uuid.UUID(str(free["id"]))]

    # Resumed, every retried run is due at once.
    assert (await api.post("/tenants/acme/jobs/hello/resume", headers=auth)).status_code == 200
    assert len(await claim_all(pool, settings)) == len(runs)


async def test_a_tenant_cannot_retry_its_way_past_the_admins_pause(
    api: httpx.AsyncClient, tenant: dict, admin: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    auth, other = tenant["auth"], await neighbour(api)
    await put_job(api, "acme", "limited", auth, concurrency={"limit": 1})
    plain = await submit_run(api, "acme", auth, job="hello")
    keyed = await submit_run(api, "acme", auth, job="limited")
    for run in (plain, keyed):
        await api.post(f"/runs/{run['id']}/cancel", headers=auth)
    assert (await api.post("/tenants/acme/pause", headers=admin)).status_code == 200
    free = await submit_run(api, "other", other, job="hello")

    assert (await api.post(f"/runs/{plain['id']}/retry", headers=auth)).json()["held"] == "paused"
    r = await api.post(
        "/tenants/acme/runs/actions", json={"action": "retry", "filter": {"job": "limited"}}, headers=auth
    )
    assert r.status_code == 200 and r.json()["changed"] == 1, r.text
    # A pause outranks the wait for a slot: the keeper grants a paused run nothing.
    assert (await row(pool, keyed["id"]))["held"] == "paused"
    await FlowKeeper(settings, pool).step()
    assert [r["id"] for r in await claim_all(pool, settings)] == [uuid.UUID(str(free["id"]))]


async def test_a_reschedule_of_a_held_run_moves_when_it_is_due_and_keeps_it_held(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    run = await submit_run(api, "acme", auth, job="hello")
    await api.post("/tenants/acme/jobs/hello/pause", headers=auth)
    later = (datetime.now(UTC) + timedelta(hours=1)).replace(microsecond=0)
    r = await api.post(f"/runs/{run['id']}/reschedule", json={"due_at": later.isoformat()}, headers=auth)
    assert r.status_code == 200 and r.json()["held"] == "paused", r.text
    earlier = await api.post(
        f"/runs/{run['id']}/reschedule", json={"due_at": "2000-01-01T00:00:00Z"}, headers=auth
    )
    assert earlier.status_code == 200 and earlier.json()["held"] == "paused", earlier.text
    assert await claim_all(pool, settings) == []
    await api.post("/tenants/acme/jobs/hello/resume", headers=auth)
    assert [r["id"] for r in await claim_all(pool, settings)] == [uuid.UUID(str(run["id"]))]


async def test_the_reapers_rescues_and_a_failed_publish_hold_a_paused_run(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    dispatched = await submit_run(api, "acme", auth, job="hello")
    unpublished = await submit_run(api, "acme", auth, job="hello")
    running = await submit_run(api, "acme", auth, job="hello")
    claimed = {r["id"]: r for r in await claim_all(pool, settings)}
    assert len(claimed) == 3
    await start(pool, [claimed[uuid.UUID(str(running["id"]))]])
    await api.post("/tenants/acme/jobs/hello/pause", headers=auth)

    async with pool.acquire() as conn:  # the engine's publish of this one failed
        await transitions.release_unpublished_runs(
            conn, fence_of([claimed[uuid.UUID(str(unpublished["id"]))]])
        )
    await lapse_leases(pool)
    assert await Reaper(settings, pool).step() == 2  # a dispatched run and a running one

    for run, attempt in ((dispatched, 0), (unpublished, 0), (running, 1)):
        after = await row(pool, run["id"])
        assert (after["status"], after["held"], after["attempt"]) == ("pending", "paused", attempt)
    assert await claim_all(pool, settings) == []


async def test_a_failed_attempt_of_a_paused_job_waits_held_for_its_retry(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    await put_job(api, "acme", "hello", auth, max_attempts=3, backoff_seconds=0.001)
    run = await submit_run(api, "acme", auth, job="hello")
    claimed = await claim_all(pool, settings)
    await start(pool, claimed)
    await api.post("/tenants/acme/jobs/hello/pause", headers=auth)
    async with pool.acquire() as conn:
        await transitions.finish_runs(conn, fence_of(claimed), [Outcome(ok=False, error="boom")])
    after = await row(pool, run["id"])
    assert (after["status"], after["held"], after["attempt"]) == ("pending", "paused", 1)
    assert await claim_all(pool, settings) == []


async def test_a_start_is_refused_while_paused_and_consumes_no_attempt(
    api: httpx.AsyncClient, tenant: dict, admin: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    auth, other = tenant["auth"], await neighbour(api)
    await put_job(api, "acme", "own", auth)
    job_run = await submit_run(api, "acme", auth, job="hello")
    tenant_run = await submit_run(api, "acme", auth, job="own")
    free = await submit_run(api, "other", other, job="hello")
    claimed = await claim_all(pool, settings)  # all three handed to workers before the pauses
    assert len(claimed) == 3
    job_run_id, tenant_run_id = uuid.UUID(str(job_run["id"])), uuid.UUID(str(tenant_run["id"]))
    await api.post("/tenants/acme/jobs/hello/pause", headers=auth)
    await api.post("/tenants/acme/pause", headers=admin)

    # One start for the three, as a worker sends it: only the neighbour's run starts; the two
    # others come back refused (no attempt).
    async with pool.acquire() as conn:
        started = await start_as_worker(conn, fence_of(claimed), [False] * 3, owner=WORKER, lease_seconds=30)
    assert started == {uuid.UUID(str(free["id"])): 1, job_run_id: None, tenant_run_id: None}
    for run in (job_run, tenant_run):
        after = await row(pool, run["id"])
        assert (after["status"], after["held"], after["attempt"]) == ("pending", "paused", 0)

    await api.post("/tenants/acme/resume", headers=admin)
    await api.post("/tenants/acme/jobs/hello/resume", headers=auth)
    again = await claim_all(pool, settings)
    assert {r["id"] for r in again} == {uuid.UUID(str(job_run["id"])), uuid.UUID(str(tenant_run["id"]))}
    assert await start(pool, again) == {r["id"] for r in again}  # a new epoch, started this time
    assert (await row(pool, job_run["id"]))["attempt"] == 1


async def test_the_claim_never_takes_a_run_of_a_paused_job_made_pending_behind_its_back(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    auth, other = tenant["auth"], await neighbour(api)
    run = await submit_run(api, "acme", auth, job="hello")
    await api.post("/tenants/acme/jobs/hello/pause", headers=auth)
    free = await submit_run(api, "other", other, job="hello")
    # An operator's own statement unholds it: the claim still leaves it, and the keeper re-holds it.
    await pool.execute(
        "UPDATE job_runs SET held = NULL, due_at = now(), held_due_at = NULL WHERE id = $1", run["id"]
    )
    assert [r["id"] for r in await claim_all(pool, settings)] == [uuid.UUID(str(free["id"]))]
    await FlowKeeper(settings, pool).step()
    assert (await row(pool, run["id"]))["held"] == "paused"
