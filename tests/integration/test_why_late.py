"""The Run page's "why is this run late", against real Postgres: each reason from what the database
holds (a pause, a concurrency limit, runs the claim takes first, the backlog quota, no engine
claiming), nothing for a run not yet due or not pending, another tenant's run not found."""

from __future__ import annotations

import uuid
from datetime import timedelta

import asyncpg
import httpx
import pytest

from app.config import Settings
from app.engine.keeper import FlowKeeper
from app.errors import NotFound
from app.services.dashboard import why_late
from tests import factories
from tests.support import put_job, submit_run

QUOTA = 100


async def _run(conn: asyncpg.Connection, ago: timedelta, **kw: object) -> uuid.UUID:
    now = await conn.fetchval("SELECT now()")
    [row] = await factories.runs(conn, 1, start=now - ago, **kw)  # type: ignore[arg-type]
    return row["id"]


async def test_a_due_run_with_nothing_before_it_is_not_held(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        run = await _run(conn, timedelta(seconds=10))
        future = await _run(conn, timedelta(seconds=-3600))
        done = await _run(conn, timedelta(seconds=10), status="succeeded")
    late = await why_late(pool, run, "acme", QUOTA)
    assert late is not None and 9 < late.late_seconds < 60
    assert late.reasons == ["Nothing holds it back: an engine should claim it within a few seconds."]
    assert await why_late(pool, future, "acme", QUOTA) is None  # not due yet
    assert await why_late(pool, done, "acme", QUOTA) is None  # not pending
    with pytest.raises(NotFound):
        await why_late(pool, run, "beta", QUOTA)  # another tenant's: not found, nothing said
    with pytest.raises(NotFound):
        await why_late(pool, uuid.uuid4(), "acme", QUOTA)


async def test_runs_the_claim_takes_first_the_quota_and_a_stalled_engine(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        run = await _run(conn, timedelta(seconds=20), priority=5)
        await _run(conn, timedelta(seconds=30), priority=5)  # the same priority, due earlier
        await _run(conn, timedelta(seconds=5), priority=1)  # a higher priority, due later
        await _run(conn, timedelta(seconds=40), priority=9)  # a lower priority: not before it
        await _run(conn, timedelta(seconds=30), priority=5, tenant_id="beta")  # another tenant's
    late = await why_late(pool, run, "acme", QUOTA)
    assert late is not None
    assert late.reasons[0].startswith("Waiting behind 2 runs of the tenant due before it")
    assert not any("quota" in r or "engine" in r for r in late.reasons)

    late = await why_late(pool, run, "acme", 4)  # acme has 4 pending runs: at a quota of 4
    assert late is not None and any("at its quota of 4 pending runs" in r for r in late.reasons)

    async with pool.acquire() as conn:
        await _run(conn, timedelta(minutes=5), priority=9, tenant_id="beta")
    late = await why_late(pool, run, "acme", QUOTA)
    assert late is not None and late.reasons[-1].startswith("No engine has claimed a due run for at least 3")


async def test_held_by_a_pause_a_concurrency_limit_or_a_rate_limit(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool, admin: dict, settings: Settings
) -> None:
    auth = tenant["auth"]
    past = (await pool.fetchval("SELECT now()") - timedelta(seconds=30)).isoformat()
    await put_job(api, "acme", "limited", auth, concurrency={"limit": 1, "key": "payload.user"})
    first = await submit_run(api, "acme", auth, job="limited", payload={"user": "ann"}, scheduled_at=past)
    second = await submit_run(api, "acme", auth, job="limited", payload={"user": "ann"}, scheduled_at=past)
    # The engine is off: the keeper grants no slot; give the first one its slot as the keeper would.
    await pool.execute(
        "UPDATE job_runs SET held = NULL, due_at = held_due_at, held_due_at = NULL WHERE id = $1", first["id"]
    )
    await pool.execute(
        "INSERT INTO concurrency_holders (run_id, tenant_id, job, key) VALUES ($1, 'acme', 'limited', 'ann')",
        first["id"],
    )
    late = await why_late(pool, uuid.UUID(str(second["id"])), "acme", QUOTA)
    assert late is not None and 25 < late.late_seconds < 90
    assert late.reasons[0] == (
        "Held by its job's concurrency limit (key 'ann'): 1 in flight of a limit of 1, "
        "and 0 runs of the same key waiting before it."
    )

    await put_job(api, "acme", "rated", auth, rate_limit={"limit": 1, "period_seconds": 60})
    now = await pool.fetchval("SELECT now()")
    runs = [
        await submit_run(
            api, "acme", auth, job="rated", scheduled_at=(now - timedelta(seconds=s)).isoformat()
        )
        for s in (50, 40, 30)
    ]
    # The keeper grants the first; the window is then full for a minute after it starts.
    assert await FlowKeeper(settings, pool).step() == 1
    room_at = await pool.fetchval("SELECT next_at FROM concurrency_slots WHERE job = 'rated'")
    late = await why_late(pool, uuid.UUID(str(runs[2]["id"])), "acme", QUOTA)
    assert late is not None and late.reasons[0] == (
        "Held by its job's rate limit: 1 started or about to start in the last 60 s, of a limit of 1; "
        f"its window has room at {room_at:%H:%M:%S} UTC, and 1 run of the same key waiting before it."
    )

    assert (await api.post("/tenants/acme/jobs/hello/pause", headers=auth)).status_code == 200
    held = await submit_run(api, "acme", auth, job="hello", scheduled_at=past)
    late = await why_late(pool, uuid.UUID(str(held["id"])), "acme", QUOTA)
    assert late is not None and late.reasons[0] == "Held: its job is paused; it runs once resumed."
    assert (await api.post("/tenants/acme/pause", headers=admin)).status_code == 200
    late = await why_late(pool, uuid.UUID(str(held["id"])), None, QUOTA)  # the admin's view
    assert (
        late is not None
        and late.reasons[0] == "Held: its job and its tenant are paused; it runs once resumed."
    )
