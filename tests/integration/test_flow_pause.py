"""Pause and resume (issue 17): a paused job or tenant holds every pending run out of the claim's
range; resume makes them due when they would have been, oldest first."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import asyncpg
import httpx

from app.config import Settings
from app.engine.claims import claim_scan
from app.engine.floor import ClaimBounds
from app.engine.keeper import FlowKeeper
from tests.support import create_tenant, put_job, submit_run


async def claim_all(pool: asyncpg.Pool, settings: Settings) -> list[str]:
    async with pool.acquire() as conn:
        return [str(r["id"]) for r in await claim_scan(conn, settings, ClaimBounds())]


async def read(api: httpx.AsyncClient, run_id: object, auth: dict) -> dict:
    r = await api.get(f"/runs/{run_id}", headers=auth)
    assert r.status_code == 200, r.text
    return dict(r.json())


async def test_pause_holds_every_pending_run_and_resume_releases_them_in_order(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    now = datetime.now(UTC)
    older = [(now - timedelta(seconds=s)).isoformat() for s in (30, 20)]
    runs = [await submit_run(api, "acme", auth, job="hello", scheduled_at=at) for at in older]
    r = await api.post("/tenants/acme/jobs/hello/pause", headers=auth)
    assert r.status_code == 200 and r.json()["paused"] is True, r.text
    late = await submit_run(api, "acme", auth, job="hello")  # held from its insert
    assert late["held"] == "paused" and late["status"] == "pending"
    for run in runs:
        held = await read(api, run["id"], auth)
        assert held["held"] == "paused" and held["status"] == "pending"
        assert held["due_at"] == run["due_at"]  # when it would be due, not the internal 'infinity'
    assert await claim_all(pool, settings) == []
    # A held run that is cancelled is no longer held, and a statement that moves a held run's due
    # time (as a reschedule would) leaves it held: the trigger of migration 0010 guards both.
    gone = await submit_run(api, "acme", auth, job="hello")
    cancelled = (await api.post(f"/runs/{gone['id']}/cancel", headers=auth)).json()
    assert cancelled["status"] == "cancelled" and cancelled["held"] is None
    await pool.execute("UPDATE job_runs SET due_at = now() WHERE id = $1", late["id"])
    assert (await read(api, late["id"], auth))["held"] == "paused"
    assert await claim_all(pool, settings) == []

    r = await api.post("/tenants/acme/jobs/hello/resume", headers=auth)
    assert r.status_code == 200 and r.json()["paused"] is False, r.text
    assert [r["held"] for r in [await read(api, x["id"], auth) for x in (*runs, late)]] == [None] * 3
    # Due at once, in their order: the claim takes the oldest first.
    assert await claim_all(pool, settings) == [str(x["id"]) for x in (*runs, late)]


async def test_a_run_back_to_pending_after_the_pause_is_held_by_that_statement(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    run = await submit_run(api, "acme", auth, job="hello")
    assert await claim_all(pool, settings) == [str(run["id"])]
    await put_job(api, "acme", "hello", auth, paused=True)  # PUT's `paused` is the same pause
    # The dispatched run comes back pending after the pause, by any statement: the flow trigger
    # holds it there (migration 0018), so the keeper finds nothing to catch up.
    await pool.execute("UPDATE job_runs SET status = 'pending' WHERE id = $1", run["id"])
    assert await FlowKeeper(settings, pool).step() == 0
    assert (await read(api, run["id"], auth))["held"] == "paused"
    assert await claim_all(pool, settings) == []


async def test_tenant_pause_is_admin_only_and_holds_the_whole_tenant(
    api: httpx.AsyncClient, tenant: dict, admin: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    other = await create_tenant(api, "other")
    other_auth = {"Authorization": f"Bearer {other['api_key']}"}
    await put_job(api, "other", "hello", other_auth)
    assert (await api.post("/tenants/acme/pause", headers=auth)).status_code == 404  # not the admin
    assert (await api.post("/tenants/nobody/pause", headers=admin)).status_code == 404
    await put_job(api, "acme", "own", auth)
    held = await submit_run(api, "acme", auth, job="hello")
    r = await api.post("/tenants/acme/pause", headers=admin)
    assert r.status_code == 200 and r.json() == {"id": "acme", "paused": True}, r.text
    await api.post("/tenants/acme/jobs/own/pause", headers=auth)
    own = await submit_run(api, "acme", auth, job="own")
    fresh = await submit_run(api, "acme", auth, job="hello")
    neighbour = await submit_run(api, "other", other_auth, job="hello")
    assert fresh["held"] == "paused" and (await read(api, held["id"], auth))["held"] == "paused"
    assert await claim_all(pool, settings) == [str(neighbour["id"])]  # the neighbour is not held

    assert (await api.post("/tenants/acme/resume", headers=admin)).status_code == 200
    # A job paused on its own stays paused when its tenant resumes.
    assert (await read(api, own["id"], auth))["held"] == "paused"
    assert sorted(await claim_all(pool, settings)) == sorted([str(held["id"]), str(fresh["id"])])
