"""Rate limits (issue 17): at most `limit` runs of one key start in any window of `period_seconds`
(a sliding window, measured where the limited API is: at the receiver), with held runs out of the
claim's range, never consuming an attempt while they wait, and a granted run that has not started
yet counted as starting now."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta

import asyncpg
import httpx

from app.config import Settings
from app.db import flow as flow_repo
from app.db import transitions
from app.db.transitions import Fence
from app.engine.claims import claim_scan
from app.engine.floor import ClaimBounds
from app.engine.keeper import FlowKeeper
from tests.integration.test_flow_concurrency import engines_and_workers
from tests.integration.test_run_history import Outcome  # a worker's outcome, as finish_runs takes it
from tests.receiver import running_receiver
from tests.support import assert_error, bearer, create_tenant, put_job, run_reaching, submit_run
from tests.ui_support import ui_sign_in

# How much later than another a request may reach the receiver after its start (a loaded 2-core
# host delivered one 0.13 s behind its window's other start).
RECEIVER_JITTER_SECONDS = 0.25


def most_in_a_window(starts: list[float], period: float) -> int:
    """The most starts any window of `period` seconds holds (a window [t, t + period) opening at
    each start is the worst one)."""
    starts = sorted(starts)
    return max((sum(1 for s in starts[i:] if s < t + period) for i, t in enumerate(starts)), default=0)


async def read(api: httpx.AsyncClient, run_id: object, auth: dict) -> dict:
    r = await api.get(f"/runs/{run_id}", headers=auth)
    assert r.status_code == 200, r.text
    return dict(r.json())


async def claim_and_start(pool: asyncpg.Pool, settings: Settings) -> list[Fence]:
    """What an engine and a worker do to every due run: claim it, then start it."""
    async with pool.acquire() as conn:
        fences = [
            Fence([(r["id"], r["scheduled_at"], r["epoch"])])
            for r in await claim_scan(conn, settings, ClaimBounds())
        ]
        for fence in fences:
            assert await transitions.start_runs(conn, fence, [False], owner="w1", lease_seconds=30)
    return fences


async def test_no_window_holds_more_than_the_limit_at_the_receiver_and_other_tenants_drain(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    """A real engine and workers call a real receiver: each key's request arrivals, across several
    windows, never put more than `limit` in one period; a tenant without a limit drains beside it."""
    auth = tenant["auth"]
    other = bearer((await create_tenant(api, "beta"))["api_key"])
    fast = settings.model_copy(update={"keeper_interval_seconds": 0.05, "poll_interval_seconds": 0.05})
    limit, period = 2, 1.0
    async with running_receiver() as receiver:
        await put_job(
            api,
            "acme",
            "call",
            auth,
            target={"type": "http", "url": receiver.url},
            rate_limit={"limit": limit, "period_seconds": period, "key": "payload.customer"},
        )
        await put_job(api, "beta", "plain", other, target={"type": "http", "url": receiver.url})
        limited = [
            await submit_run(api, "acme", auth, job="call", payload={"customer": c, "n": i})
            for i in range(7)
            for c in ("a", "b")
        ]
        assert {r["held"] for r in limited} == {"rate_limit"}
        async with engines_and_workers(fast, pool):
            began = time.monotonic()
            plain = [await submit_run(api, "beta", other, job="plain", payload={"n": i}) for i in range(20)]
            for run in plain:
                assert (await run_reaching(api, str(run["id"]), other, {"succeeded"}, timeout=30))[
                    "held"
                ] is None
            plain_drained = time.monotonic() - began
            started: dict[str, list[float]] = defaultdict(list)  # the starts Postgres recorded
            for run in limited:
                done = await run_reaching(api, str(run["id"]), auth, {"succeeded", "failed"}, timeout=60)
                assert done["status"] == "succeeded" and done["attempt"] == 1, done
                at = datetime.fromisoformat(done["started_at"]).timestamp()
                started[str(done["payload"]["customer"])].append(at)
        starts: dict[str, list[float]] = defaultdict(list)
        for call in receiver.calls:
            starts[str(call.payload.get("customer", "-"))].append(call.started)
    assert {k: len(v) for k, v in starts.items()} == {"a": 7, "b": 7, "-": 20}
    for key in ("a", "b"):
        # The limit is on starts: no window of the period holds more than `limit` of them.
        assert most_in_a_window(started[key], period) == limit, (key, sorted(started[key]))
        # A request reaches the receiver a moment after its start, and that moment varies with the
        # host's load: the receiver sees the limit held within that jitter.
        slack = RECEIVER_JITTER_SECONDS
        assert most_in_a_window(starts[key], period - slack) == limit, (key, sorted(starts[key]))
        # Seven starts at two a second: at least three full windows apart from the first to the last.
        assert max(starts[key]) - min(starts[key]) >= 3 * period
    # The unlimited tenant is not paced by the limited one: its 20 runs have all arrived while the
    # limited keys still had windows to wait for (in seconds on an idle host, not 20 / 2 windows).
    assert max(starts["-"]) < max(starts["a"] + starts["b"]) - period, plain_drained


async def test_a_granted_run_counts_as_starting_now_until_it_starts(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    """The hazard of counting grants: a run granted long ago but not started yet (waiting in
    JetStream, or held by a worker for fairness) may start at any moment, so it still fills the
    window; once started, it fills it for a period after its start, not after its grant."""
    auth = tenant["auth"]
    await put_job(api, "acme", "one", auth, rate_limit={"limit": 1, "period_seconds": 1})
    first, second = [await submit_run(api, "acme", auth, job="one") for _ in range(2)]
    keeper = FlowKeeper(settings, pool)
    assert await keeper.step() == 1
    await asyncio.sleep(1.2)  # a period after the grant; the granted run has not started
    await pool.execute("UPDATE concurrency_slots SET next_at = NULL")  # look now, not when told
    assert await keeper.step() == 0
    [fence] = await claim_and_start(pool, settings)
    assert str(fence.ids[0]) == first["id"]
    await pool.execute("UPDATE concurrency_slots SET next_at = NULL")
    assert await keeper.step() == 0  # it started just now: the window is full for a period
    row = await pool.fetchrow("SELECT granted_at, started_at FROM rate_limit_starts")
    assert row["started_at"] > row["granted_at"] + timedelta(seconds=1)
    # The key sleeps until the start is a period (and the margin for the request's way) old, then
    # the next run goes.
    next_at = await pool.fetchval("SELECT next_at FROM concurrency_slots")
    assert next_at == row["started_at"] + timedelta(seconds=1 + settings.rate_limit_margin_seconds)
    assert (await read(api, second["id"], auth))["held"] == "rate_limit"
    while await keeper.step() == 0:
        await asyncio.sleep(0.05)
    assert await pool.fetchval("SELECT now()") >= next_at
    assert (await read(api, second["id"], auth))["held"] is None


async def test_held_runs_wait_without_attempts_show_when_they_can_run_and_cancel(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    job = await put_job(
        api, "acme", "one", auth, rate_limit={"limit": 2, "period_seconds": 60, "key": "payload.c"}
    )
    assert job["rate_limit"] == {"limit": 2, "period_seconds": 60.0, "key": "payload.c"}
    assert job["concurrency"] is None and job["in_flight"] == 0
    runs = [await submit_run(api, "acme", auth, job="one", payload={"c": "x"}) for _ in range(4)]
    other_key = await submit_run(api, "acme", auth, job="one", payload={})  # the empty key
    assert await claim_and_start(pool, settings) == []  # held runs are outside the claim's range
    keeper = FlowKeeper(settings, pool)
    assert await keeper.step() == 3  # two of key "x", one of the empty key
    assert await keeper.step() == 0  # the window of "x" is full: no busy re-grant
    async with pool.acquire() as conn:
        assert (await flow_repo.count_held_runs(conn, 100))["rate_limit"] == 2
    started = await claim_and_start(pool, settings)
    assert len(started) == 3
    now = datetime.now(UTC)
    for run in runs[2:]:
        held = await read(api, run["id"], auth)
        assert held["status"] == "pending" and held["held"] == "rate_limit" and held["attempt"] == 0
        # Not due before the oldest start of its window is a period old.
        assert (
            now + timedelta(seconds=55)
            < datetime.fromisoformat(held["due_at"])
            <= now + timedelta(seconds=61)
        )
    assert (await read(api, other_key["id"], auth))["attempt"] == 1
    cancelled = (await api.post(f"/runs/{runs[3]['id']}/cancel", headers=auth)).json()
    assert cancelled["status"] == "cancelled" and cancelled["held"] is None
    assert (await read(api, runs[2]["id"], auth))["held"] == "rate_limit"


async def test_a_retry_waits_for_the_window_again(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    """Each attempt is a start the limited API sees: a failed attempt with attempts left goes back
    to the window's queue, and consumes no attempt while it waits there."""
    auth = tenant["auth"]
    await put_job(api, "acme", "one", auth, rate_limit={"limit": 1, "period_seconds": 60}, backoff_seconds=0)
    run = await submit_run(api, "acme", auth, job="one")
    keeper = FlowKeeper(settings, pool)
    assert await keeper.step() == 1
    [fence] = await claim_and_start(pool, settings)
    async with pool.acquire() as conn:
        [retried] = await transitions.finish_runs(conn, fence, [Outcome(False, "boom", "failed")])
    assert retried["status"] == "pending"
    again = await read(api, run["id"], auth)
    assert again["held"] == "rate_limit" and again["attempt"] == 1
    await pool.execute("UPDATE concurrency_slots SET next_at = NULL")
    assert await keeper.step() == 0  # its first start fills the window for a minute
    assert await claim_and_start(pool, settings) == []
    assert (await read(api, run["id"], auth))["attempt"] == 1


async def test_pause_holds_rate_limited_runs_and_resume_gives_them_back_to_the_window(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    await put_job(api, "acme", "one", auth, rate_limit={"limit": 1, "period_seconds": 60})
    first, second = [await submit_run(api, "acme", auth, job="one") for _ in range(2)]
    keeper = FlowKeeper(settings, pool)
    assert await keeper.step() == 1  # `first` granted, not started
    assert (await api.post("/tenants/acme/jobs/one/pause", headers=auth)).status_code == 200
    for run in (first, second):
        assert (await read(api, run["id"], auth))["held"] == "paused"
    # The granted run never started: it leaves the window.
    assert await pool.fetchval("SELECT count(*) FROM rate_limit_starts") == 0
    assert await keeper.step() == 0 and await claim_and_start(pool, settings) == []
    assert (await api.post("/tenants/acme/jobs/one/resume", headers=auth)).status_code == 200
    for run in (first, second):
        assert (await read(api, run["id"], auth))["held"] == "rate_limit"
    assert await keeper.step() == 1
    assert len(await claim_and_start(pool, settings)) == 1


async def test_removing_the_limit_releases_held_runs_and_both_limits_are_refused(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    await put_job(api, "acme", "one", auth, rate_limit={"limit": 1, "period_seconds": 3600})
    runs = [await submit_run(api, "acme", auth, job="one") for _ in range(3)]
    keeper = FlowKeeper(settings, pool)
    assert await keeper.step() == 1 and await keeper.step() == 0
    both = await api.put(
        "/tenants/acme/jobs/one",
        json={
            "target": {"type": "noop"},
            "concurrency": {"limit": 1},
            "rate_limit": {"limit": 1, "period_seconds": 1},
        },
        headers=auth,
    )
    assert_error(both, 422, "invalid_input", "rate_limit")
    assert (await api.get("/tenants/acme/jobs/one", headers=auth)).json()["rate_limit"][
        "period_seconds"
    ] == 3600
    job = await put_job(api, "acme", "one", auth)  # the limit removed: effective on the next pass
    assert job["rate_limit"] is None
    assert await keeper.step() == 2
    assert {(await read(api, r["id"], auth))["held"] for r in runs} == {None}
    assert len(await claim_and_start(pool, settings)) == 3


async def test_the_jobs_page_shows_the_rate_limit(api: httpx.AsyncClient, tenant: dict) -> None:
    await put_job(
        api,
        "acme",
        "rated",
        tenant["auth"],
        rate_limit={"limit": 5, "period_seconds": 1.5, "key": "payload.c"},
    )
    browser = await ui_sign_in(str(api.base_url), tenant["api_key"])
    page = (await browser.get("/ui/jobs")).text
    await browser.aclose()
    assert "rate limit 5 per 1.5 s per <code>payload.c</code>" in page
