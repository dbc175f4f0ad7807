"""pause_after_failures: a job is paused once that many of its runs in a row end failed, in the
statement that records the last of them (migration 0020's trigger), through the fenced transitions
the worker and the reaper use; a success starts the count again, and so does a resume. The pause is
the one POST …/pause makes: the job's pending runs are held, new ones are held as they come."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest

from app.config import Settings
from app.db import transitions
from app.engine.claims import claim_scan
from app.engine.floor import ClaimBounds
from tests.integration.test_run_history import Outcome, fence_of, make_due
from tests.support import put_job, submit_run
from tests.ui_support import ui_sign_in

FAIL = Outcome(False, "HTTP 500: down", "failed", http_status=500)
OK = Outcome(True, outcome="succeeded")


async def claim_and_start(pool: asyncpg.Pool, settings: Settings) -> list[asyncpg.Record]:
    """Every due run, claimed and started (running), oldest first."""
    async with pool.acquire() as conn:
        claimed = sorted(await claim_scan(conn, settings, ClaimBounds()), key=lambda r: r["scheduled_at"])
        if claimed:
            fence = fence_of(claimed)
            await transitions.start_runs(conn, fence, [False] * len(claimed), owner="w1", lease_seconds=30)
    return claimed


async def finish(
    pool: asyncpg.Pool, runs: list[asyncpg.Record], outcomes: list[Outcome]
) -> list[asyncpg.Record]:
    async with pool.acquire() as conn:
        return await transitions.finish_runs(conn, fence_of(runs), outcomes)


async def job(api: httpx.AsyncClient, auth: dict, name: str) -> dict[str, Any]:
    r = await api.get(f"/tenants/acme/jobs/{name}", headers=auth)
    assert r.status_code == 200, r.text
    return dict(r.json())


async def run(api: httpx.AsyncClient, auth: dict, run_id: object) -> dict[str, Any]:
    r = await api.get(f"/runs/{run_id}", headers=auth)
    assert r.status_code == 200, r.text
    return dict(r.json())


async def submit(api: httpx.AsyncClient, auth: dict, name: str, n: int, **body: object) -> list[dict]:
    return [await submit_run(api, "acme", auth, job=name, **body) for _ in range(n)]


def streak(j: dict) -> tuple[bool, str | None, int]:
    return j["paused"], j["paused_reason"], j["consecutive_failures"]


async def test_n_failures_in_a_row_pause_the_job_a_success_or_a_resume_start_again(
    settings: Settings, pool: asyncpg.Pool, api: httpx.AsyncClient, tenant: dict
) -> None:
    auth = tenant["auth"]
    created = await put_job(api, "acme", "flaky", auth, max_attempts=1, pause_after_failures=3)
    assert (created["pause_after_failures"], *streak(created)) == (3, False, None, 0)

    await submit(api, auth, "flaky", 2)
    await finish(pool, await claim_and_start(pool, settings), [FAIL, FAIL])
    assert streak(await job(api, auth, "flaky")) == (False, None, 2)
    await submit(api, auth, "flaky", 1)
    await finish(pool, await claim_and_start(pool, settings), [OK])
    assert streak(await job(api, auth, "flaky")) == (False, None, 0)  # a success ends the streak

    await submit(api, auth, "flaky", 3)
    later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    waiting = await submit(api, auth, "flaky", 2, scheduled_at=later)  # pending when the pause comes
    running = await claim_and_start(pool, settings)
    assert len(running) == 3
    await finish(pool, running[:2], [FAIL, FAIL])
    assert streak(await job(api, auth, "flaky")) == (False, None, 2)
    await finish(pool, running[2:], [FAIL])  # the third in a row

    paused = await job(api, auth, "flaky")
    assert streak(paused) == (True, "failures", 3) and paused["next_fire_at"] is None
    for w in waiting:
        assert (await run(api, auth, w["id"]))["held"] == "paused"
    [new] = await submit(api, auth, "flaky", 1)
    assert new["held"] == "paused"  # held as it is made, as under any pause
    browser = await ui_sign_in(str(api.base_url), tenant["api_key"])
    listed = (await browser.get("/ui/jobs")).text
    assert "paused after 3 failures" in listed and "pauses after 3 failures in a row (3 now)" in listed
    editor = (await browser.get("/ui/jobs/flaky")).text
    assert "&#34;pause_after_failures&#34;: 3" in editor and "&#34;overlap&#34;: &#34;allow&#34;" in editor
    await browser.aclose()
    assert await claim_and_start(pool, settings) == []
    # Pausing again keeps the reason; a resume starts the count again and releases the runs.
    r = await api.post("/tenants/acme/jobs/flaky/pause", headers=auth)
    assert streak(r.json()) == (True, "failures", 3)
    r = await api.post("/tenants/acme/jobs/flaky/resume", headers=auth)
    assert streak(r.json()) == (False, None, 0)
    for w in [*waiting, new]:
        assert (await run(api, auth, w["id"]))["held"] is None
    assert [str(r["id"]) for r in await claim_and_start(pool, settings)] == [new["id"]]


async def test_a_put_resumes_and_pauses_like_the_routes(
    settings: Settings, pool: asyncpg.Pool, api: httpx.AsyncClient, tenant: dict
) -> None:
    auth = tenant["auth"]
    await put_job(api, "acme", "flaky", auth, max_attempts=1, pause_after_failures=1)
    await submit(api, auth, "flaky", 1)
    await finish(pool, await claim_and_start(pool, settings), [FAIL])
    assert streak(await job(api, auth, "flaky")) == (True, "failures", 1)
    kept = await put_job(api, "acme", "flaky", auth, max_attempts=1, pause_after_failures=1, paused=True)
    assert streak(kept) == (True, "failures", 1)  # still paused for the same reason
    resumed = await put_job(api, "acme", "flaky", auth, max_attempts=1, pause_after_failures=1)
    assert streak(resumed) == (False, None, 0)
    requested = await put_job(api, "acme", "flaky", auth, paused=True)
    assert streak(requested) == (True, "requested", 0)
    r = await api.post("/tenants/acme/jobs/hello/pause", headers=auth)
    assert streak(r.json()) == (True, "requested", 0)


async def test_a_job_without_the_setting_counts_nothing(
    settings: Settings, pool: asyncpg.Pool, api: httpx.AsyncClient, tenant: dict
) -> None:
    auth = tenant["auth"]
    await put_job(api, "acme", "plain", auth, max_attempts=1)
    runs = await submit(api, auth, "plain", 4)
    await finish(pool, await claim_and_start(pool, settings), [FAIL] * 4)
    assert streak(await job(api, auth, "plain")) == (False, None, 0)
    flags = await pool.fetch("SELECT counts_failures FROM job_runs WHERE job = 'plain'")
    assert [f["counts_failures"] for f in flags] == [None] * len(runs)  # nothing stored on the default path


async def test_only_a_runs_last_attempt_counts_and_the_reaper_counts_too(
    settings: Settings, pool: asyncpg.Pool, api: httpx.AsyncClient, tenant: dict
) -> None:
    auth = tenant["auth"]
    await put_job(api, "acme", "retrying", auth, max_attempts=2, backoff_seconds=0, pause_after_failures=2)
    [first] = await submit(api, auth, "retrying", 1)
    await finish(pool, await claim_and_start(pool, settings), [FAIL])  # attempt 1 of 2: retried
    assert streak(await job(api, auth, "retrying")) == (False, None, 0)
    async with pool.acquire() as conn:
        await make_due(conn)
    await claim_and_start(pool, settings)
    await pool.execute(
        "UPDATE job_runs SET lease_expires_at = now() - interval '1 second' WHERE status = 'running'"
    )
    async with pool.acquire() as conn:
        # Lost on its last attempt: failed. The lease moved in its own transaction, so the queue row did too.
        [reaped] = await transitions.reap_running_runs(conn, 10, 0.0)
    assert reaped["status"] == "failed" and str(reaped["id"]) == first["id"]
    assert streak(await job(api, auth, "retrying")) == (False, None, 1)

    await submit(api, auth, "retrying", 1)
    await finish(pool, await claim_and_start(pool, settings), [FAIL])
    async with pool.acquire() as conn:
        await make_due(conn)
    await finish(pool, await claim_and_start(pool, settings), [FAIL])
    assert streak(await job(api, auth, "retrying")) == (True, "failures", 2)


async def test_concurrent_failures_pause_once_at_the_bound(
    settings: Settings, pool: asyncpg.Pool, api: httpx.AsyncClient, tenant: dict
) -> None:
    """Ten workers record ten failures at once: the count is exact and the fifth pauses the job;
    the ones recorded after it, while it is paused, are not counted."""
    auth = tenant["auth"]
    await put_job(api, "acme", "flaky", auth, max_attempts=1, pause_after_failures=5)
    await submit(api, auth, "flaky", 10)
    running = await claim_and_start(pool, settings)

    async def one_worker(r: asyncpg.Record) -> None:
        for _ in range(20):  # as the completer does with a transient error: again, a moment later
            try:
                await finish(pool, [r], [FAIL])
                return
            except asyncpg.LockNotAvailableError:
                await asyncio.sleep(0.05)
        raise AssertionError("never recorded")

    await asyncio.gather(*(one_worker(r) for r in running))
    assert streak(await job(api, auth, "flaky")) == (True, "failures", 5)
    statuses = await pool.fetch("SELECT status FROM job_runs WHERE job = 'flaky'")
    assert [s["status"] for s in statuses] == ["failed"] * 10


async def test_an_outcome_waiting_on_a_paused_jobs_row_gives_way_instead_of_deadlocking(
    settings: Settings, pool: asyncpg.Pool, api: httpx.AsyncClient, tenant: dict
) -> None:
    """The lock order of a pause: the job's row, then the tenant's flow lock. A batch of outcomes
    that retries a run of the tenant holds that flow lock shared, and a counted failure in it then
    wants the job's row: it waits at most 200 ms and fails (lock_not_available, transient: the
    completer records it again), so the pause goes through instead of one of them being killed by
    the deadlock detector a second later. Recorded again, the failure counts once."""
    auth = tenant["auth"]
    await put_job(api, "acme", "flaky", auth, max_attempts=1, pause_after_failures=3)
    await put_job(api, "acme", "retried", auth, max_attempts=3)
    await submit(api, auth, "flaky", 1)
    await submit(api, auth, "retried", 1)
    running = await claim_and_start(pool, settings)
    outcomes = [FAIL, FAIL]  # flaky's only attempt fails; retried's first is retried (-> pending)

    async with pool.acquire() as pausing, pausing.transaction():
        await pausing.execute(
            "UPDATE jobs SET updated_at = now() WHERE tenant_id = 'acme' AND name = 'flaky'"
        )
        started = time.monotonic()
        recording = asyncio.create_task(finish(pool, running, outcomes))
        for _ in range(100):  # until the outcomes wait for the job's row
            if await pool.fetchval("SELECT count(*) FROM pg_locks WHERE NOT granted") or recording.done():
                break
            await asyncio.sleep(0.005)
        flow = "SELECT pg_advisory_xact_lock(scheduler_tenant_flow_key('acme'))"
        await asyncio.wait_for(pausing.execute(flow), 5)
        with pytest.raises(asyncpg.LockNotAvailableError):
            await recording
        assert time.monotonic() - started < 1.0  # before any deadlock check (deadlock_timeout 1 s)

    await finish(pool, running, outcomes)  # the completer's retry
    assert streak(await job(api, auth, "flaky")) == (False, None, 1)
    statuses = await pool.fetch("SELECT job, status FROM job_runs ORDER BY job")
    assert [(s["job"], s["status"]) for s in statuses] == [("flaky", "failed"), ("retried", "pending")]
