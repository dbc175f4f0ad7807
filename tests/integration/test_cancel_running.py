"""Cancelling a running run, decided by Postgres (real Postgres, through the API and the fenced
transitions a worker uses): the cancel statement ends the run and closes its attempt as `cancelled`,
frees its concurrency slot, and whatever the cut-off worker does afterwards (heartbeat, finish)
changes nothing. Against a finishing attempt, exactly one of the two wins."""

from __future__ import annotations

import asyncio
import random
import re
from typing import Any

import asyncpg
import httpx

from app.config import Settings
from app.db import transitions
from app.engine.claims import claim_scan
from app.engine.floor import ClaimBounds
from app.engine.keeper import FlowKeeper
from app.services.admission import AdmissionControl
from app.services.run_actions import RunFilter, act_on_runs
from tests.integration.test_run_history import Outcome, fence_of
from tests.support import AS_ADMIN, put_job, submit_run

SUCCESS = Outcome(True, outcome="succeeded")


async def start_all(pool: asyncpg.Pool, settings: Settings) -> list[asyncpg.Record]:
    """Claims every due run and starts it as worker w1: what a worker has running."""
    async with pool.acquire() as conn:
        claimed = await claim_scan(conn, settings, ClaimBounds())
        started = await transitions.start_runs(
            conn, fence_of(claimed), [False] * len(claimed), owner="w1", lease_seconds=30
        )
    assert len(started) == len(claimed)
    return claimed


def cancelled_while_running(metrics_text: str, via: str) -> float:
    pattern = rf'^scheduler_runs_cancelled_while_running_total\{{via="{via}"\}} (\S+)$'
    m = re.search(pattern, metrics_text, re.M)
    return float(m.group(1)) if m else 0.0


async def test_a_cancelled_running_run_ends_its_attempt_frees_its_slot_and_ignores_its_worker(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    await put_job(api, "acme", "one", auth, concurrency={"limit": 1}, max_attempts=3)
    first, second = [await submit_run(api, "acme", auth, job="one") for _ in range(2)]
    keeper = FlowKeeper(settings, pool)
    assert await keeper.step() == 1
    [running] = await start_all(pool, settings)
    assert str(running["id"]) == first["id"]
    before = cancelled_while_running((await api.get("/metrics")).text, "run")

    r = await api.post(f"/runs/{first['id']}/cancel", headers=auth)
    assert r.status_code == 200, r.text
    cancelled = r.json()
    assert cancelled["status"] == "cancelled" and cancelled["attempt"] == 1
    [entry] = cancelled["attempts"]
    assert (entry["attempt"], entry["epoch"], entry["worker"], entry["outcome"]) == (
        1,
        running["epoch"],
        "w1",
        "cancelled",
    )
    assert entry["finished_at"] is not None and entry["duration_ms"] is not None
    assert cancelled_while_running((await api.get("/metrics")).text, "run") == before + 1

    # Out of the queue (no lease left for the reaper), and its slot free: the next run of the key is
    # granted at once.
    assert await pool.fetchval("SELECT count(*) FROM run_queue WHERE id = $1", running["id"]) == 0
    assert (
        await pool.fetchval("SELECT count(*) FROM concurrency_holders WHERE run_id = $1", running["id"]) == 0
    )
    assert await keeper.step() == 1
    assert (await api.get(f"/runs/{second['id']}", headers=auth)).json()["held"] is None

    # The cut-off worker: its heartbeat keeps nothing, its late success is fenced out, and the
    # fallback's read names the run as cancelled in that epoch.
    fence = fence_of([running])
    async with pool.acquire() as conn:
        assert await transitions.heartbeat_runs(conn, fence, 30) == set()
        assert await transitions.finish_runs(conn, fence, [SUCCESS]) == []
        assert await transitions.finish_runs(conn, fence, [Outcome(False, "boom")]) == []
        assert await transitions.cancelled_among(conn, fence) == {running["id"]}
    after = (await api.get(f"/runs/{first['id']}", headers=auth)).json()
    assert after == cancelled  # nothing changed: no retry, no outcome, no other history entry
    again = await api.post(f"/runs/{first['id']}/cancel", headers=auth)
    assert again.status_code == 409 and again.json()["field"] == "status"


async def test_cancel_and_finish_at_the_same_instant(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    """Both sent together for every run: whichever Postgres orders first wins, the other matches
    nothing; over many runs both orders happen."""
    auth = tenant["auth"]
    n = 80
    r = await api.post("/tenants/acme/runs/batch", json={"runs": [{"job": "hello"}] * n}, headers=auth)
    assert r.status_code == 201, r.text
    started = await start_all(pool, settings)

    async def race(run: asyncpg.Record) -> tuple[bool, int]:
        async def finish() -> bool:
            await asyncio.sleep(random.uniform(0, 0.004))
            async with pool.acquire() as conn:
                return bool(await transitions.finish_runs(conn, fence_of([run]), [SUCCESS]))

        async def cancel() -> int:
            await asyncio.sleep(random.uniform(0, 0.004))
            return (await api.post(f"/runs/{run['id']}/cancel", headers=auth)).status_code

        won, answer = await asyncio.gather(finish(), cancel())
        return won, answer

    results = await asyncio.gather(*(race(run) for run in started))
    statuses = dict(await pool.fetch("SELECT id, status FROM job_runs"))
    seen = set()
    for run, (won_finish, answer) in zip(started, results, strict=True):
        status = statuses[run["id"]]
        seen.add(status)
        assert (status, won_finish, answer) in (("succeeded", True, 409), ("cancelled", False, 200))
        entries = (await api.get(f"/runs/{run['id']}", headers=auth)).json()["attempts"]
        assert [e["outcome"] for e in entries] == [status]
    assert seen == {"succeeded", "cancelled"}, "the race did not happen both ways"


async def test_a_bulk_cancel_takes_running_runs_and_names_them_for_their_workers(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    r = await api.post("/tenants/acme/runs/batch", json={"runs": [{"job": "hello"}] * 5}, headers=auth)
    assert r.status_code == 201, r.text
    running = await start_all(pool, settings)
    waiting = [(await submit_run(api, "acme", auth, job="hello"))["id"] for _ in range(3)]
    told: list[tuple[Any, Any]] = []

    async def stop_running(rows: Any) -> None:
        told.extend((row["id"], row["epoch"]) for row in rows)

    outcome = await act_on_runs(
        pool,
        AdmissionControl(100),
        stop_running,
        "acme",
        "cancel",
        RunFilter(job="hello"),
        100,
        None,
        audit=AS_ADMIN,
    )
    assert (outcome.matched, outcome.changed) == (8, 8)
    assert sorted(told) == sorted((run["id"], run["epoch"]) for run in running)  # the running ones only
    rows = await api.get("/tenants/acme/runs", params={"job": "hello"}, headers=auth)
    by_id = {run["id"]: run for run in rows.json()["runs"]}
    for run in running:
        assert [e["outcome"] for e in by_id[str(run["id"])]["attempts"]] == ["cancelled"]
    for run_id in waiting:
        assert by_id[run_id]["status"] == "cancelled" and by_id[run_id]["attempts"] == []
