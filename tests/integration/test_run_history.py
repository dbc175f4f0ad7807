"""Attempt history on the run row (issue 16, item 1), written by the statements that already run:
the worker's start appends an attempt's entry, its finish or the reaper closes it. Against real
Postgres, through the fenced transitions the worker and the reaper use, read back through the API."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from datetime import timedelta

import asyncpg
import httpx

from app.config import Settings
from app.db import transitions
from app.db.transitions import Fence
from app.domain import NO_RESULT, StoredResult
from app.engine.claims import claim_scan
from app.engine.floor import ClaimBounds
from tests import factories
from tests.support import ADMIN_TOKEN
from tests.ui_support import ui_sign_in


@dataclass
class Outcome:
    """What a worker's Delivery hands finish_runs (app.domain.AttemptOutcome)."""

    ok: bool
    error: str | None = None
    outcome: str = "failed"
    http_status: int | None = None
    retry_after: float | None = None
    result: StoredResult = NO_RESULT


async def claim_and_start(
    conn: asyncpg.Connection, settings: Settings, *, inline: bool = False, lease_seconds: float = 30
) -> list[asyncpg.Record]:
    claimed = await claim_scan(conn, settings, ClaimBounds())
    fence = Fence([(r["id"], r["scheduled_at"], r["epoch"]) for r in claimed])
    await transitions.start_runs(
        conn, fence, [inline] * len(claimed), owner="w1", lease_seconds=lease_seconds
    )
    return claimed


def fence_of(rows: list[asyncpg.Record]) -> Fence:
    return Fence([(r["id"], r["scheduled_at"], r["epoch"]) for r in rows])


async def make_due(conn: asyncpg.Connection) -> None:
    await conn.execute("UPDATE job_runs SET due_at = now() - interval '1 second' WHERE status = 'pending'")


async def read(api: httpx.AsyncClient, admin: dict, run_id: object) -> dict:
    r = await api.get(f"/runs/{run_id}", headers=admin)
    assert r.status_code == 200, r.text
    return dict(r.json())


async def test_a_failure_a_retry_and_a_success_are_kept_oldest_first_with_the_result(
    settings: Settings, pool: asyncpg.Pool, api: httpx.AsyncClient, admin: dict
) -> None:
    async with pool.acquire() as conn:
        [run] = await factories.runs(conn, 1, max_attempts=3)
        first = await claim_and_start(conn, settings)
        running = await read(api, admin, run["id"])
        assert running["status"] == "running"
        [open_entry] = running["attempts"]
        assert open_entry["outcome"] is None and open_entry["finished_at"] is None
        assert (open_entry["attempt"], open_entry["epoch"], open_entry["worker"]) == (1, 1, "w1")
        [retried] = await transitions.finish_runs(
            conn, fence_of(first), [Outcome(False, "HTTP 500: down", "failed", http_status=500)]
        )
        # A retry comes back with its due_at (the runs-pending hint, app/pending.py), nothing else does.
        due_at = await conn.fetchval("SELECT due_at FROM job_runs WHERE id = $1", run["id"])
        assert (retried["id"], retried["status"], retried["due_at"]) == (run["id"], "pending", due_at)
        await make_due(conn)
        second = await claim_and_start(conn, settings)
        [ended] = await transitions.finish_runs(
            conn, fence_of(second), [Outcome(True, outcome="succeeded", result=StoredResult('{"n": 1}'))]
        )
        assert (ended["status"], ended["due_at"]) == ("succeeded", None)
    done = await read(api, admin, run["id"])
    assert done["status"] == "succeeded" and done["result"] == {"n": 1} and done["result_truncated"] is False
    failed, succeeded = done["attempts"]
    assert (failed["attempt"], failed["epoch"], failed["outcome"]) == (1, 1, "failed")
    assert failed["http_status"] == 500 and failed["error"] == "HTTP 500: down"
    assert (succeeded["attempt"], succeeded["epoch"], succeeded["outcome"]) == (2, 2, "succeeded")
    assert succeeded["error"] is None and succeeded["http_status"] is None
    for entry in done["attempts"]:
        assert entry["worker"] == "w1" and entry["started_at"] <= entry["finished_at"]
        assert entry["duration_ms"] is not None and entry["duration_ms"] >= 0
    # The listing shows the same run the same way.
    listed = await api.get("/tenants/acme/runs", headers=admin)
    [same] = [r for r in listed.json()["runs"] if r["id"] == done["id"]]
    assert same == done


async def test_a_webhooks_success_keeps_its_status_and_a_handlers_writes_no_history(
    settings: Settings, pool: asyncpg.Pool, api: httpx.AsyncClient, admin: dict
) -> None:
    """A success with an answer status (a webhook's, whatever 2xx) is stored in the history, once,
    at its place; one without (a python handler's) stays the row's own columns, writing nothing more."""
    async with pool.acquire() as conn:
        rows = await factories.runs(conn, 2, max_attempts=3)
        first = await claim_and_start(conn, settings)
        hook, handler = (next(r for r in first if r["id"] == row["id"]) for row in rows)
        await transitions.finish_runs(
            conn, fence_of([hook]), [Outcome(False, "HTTP 503: busy", http_status=503)]
        )
        await make_due(conn)
        [hook] = await claim_and_start(conn, settings)
        await transitions.finish_runs(
            conn,
            fence_of([hook, handler]),
            [Outcome(True, outcome="succeeded", http_status=202), Outcome(True, outcome="succeeded")],
        )
        stored = dict(await conn.fetch("SELECT id, attempts FROM job_runs"))
    assert [(e["attempt"], e["outcome"], e["http_status"]) for e in stored[hook["id"]]] == [
        (1, "failed", 503),
        (2, "succeeded", 202),
    ]
    assert stored[handler["id"]] == []
    done = await read(api, admin, hook["id"])
    assert done["status"] == "succeeded"
    assert [
        (e["attempt"], e["epoch"], e["outcome"], e["http_status"], e["error"]) for e in done["attempts"]
    ] == [
        (1, 1, "failed", 503, "HTTP 503: busy"),
        (2, 2, "succeeded", 202, None),
    ]
    assert done["attempts"][1]["worker"] == "w1" and done["attempts"][1]["duration_ms"] >= 0
    browser = await ui_sign_in(str(api.base_url), ADMIN_TOKEN)
    try:
        page = (await browser.get(f"/ui/runs/{hook['id']}")).text
    finally:
        await browser.aclose()
    timeline = page[page.index('<table id="attempts">') :]
    assert re.search(r"outcome-succeeded.*?</td>\s*<td>202</td>", timeline, re.DOTALL), timeline[:2000]
    [entry] = (await read(api, admin, handler["id"]))["attempts"]
    assert (entry["outcome"], entry["http_status"]) == ("succeeded", None)


async def test_a_noop_run_is_recorded_complete_by_its_start_alone(
    settings: Settings, pool: asyncpg.Pool, api: httpx.AsyncClient, admin: dict
) -> None:
    async with pool.acquire() as conn:
        [run] = await factories.runs(conn, 1)
        await claim_and_start(conn, settings, inline=True)
    done = await read(api, admin, run["id"])
    [entry] = done["attempts"]
    assert done["status"] == "succeeded" and done["result"] is None
    assert entry["outcome"] == "succeeded" and entry["duration_ms"] == 0
    assert entry["finished_at"] == entry["started_at"]


async def test_a_timeout_and_a_stale_result_the_fence_drops(
    settings: Settings, pool: asyncpg.Pool, api: httpx.AsyncClient, admin: dict
) -> None:
    async with pool.acquire() as conn:
        [run] = await factories.runs(conn, 1, max_attempts=1)
        started = await claim_and_start(conn, settings)
        stale = Fence([(run["id"], run["scheduled_at"], started[0]["epoch"] - 1)])
        assert await transitions.finish_runs(conn, stale, [Outcome(True, outcome="succeeded")]) == []
        await transitions.finish_runs(
            conn, fence_of(started), [Outcome(False, "timed out after 30s", "timed_out")]
        )
    done = await read(api, admin, run["id"])
    assert done["status"] == "failed"
    assert [e["outcome"] for e in done["attempts"]] == ["timed_out"]


async def test_a_run_whose_lease_expired_shows_its_attempt_lost(
    settings: Settings, pool: asyncpg.Pool, api: httpx.AsyncClient, admin: dict
) -> None:
    """The lease really expires (no worker beats for it); the reaper closes the attempt as lost, and
    the worker's late result is discarded, its entry not rewritten."""
    async with pool.acquire() as conn:
        [run] = await factories.runs(conn, 1, max_attempts=2)
        started = await claim_and_start(conn, settings, lease_seconds=0.2)
        await asyncio.sleep(0.4)
        # The start left the run's queue row under the dispatch lease: read that much early.
        lead = settings.dispatch_lease_seconds - 0.2
        [reaped] = await transitions.reap_running_runs(conn, 10, lead)
        assert reaped["status"] == "pending"
        late = await transitions.finish_runs(conn, fence_of(started), [Outcome(True, outcome="succeeded")])
        assert late == []
    done = await read(api, admin, run["id"])
    [lost] = done["attempts"]
    assert lost["outcome"] == "lost" and lost["finished_at"] is not None
    assert lost["error"] == "lease expired: the worker stopped heartbeating"
    assert done["result"] is None


async def test_a_cancelled_run_keeps_the_attempts_it_made(
    settings: Settings, pool: asyncpg.Pool, api: httpx.AsyncClient, admin: dict
) -> None:
    async with pool.acquire() as conn:
        [run] = await factories.runs(conn, 1, max_attempts=3)
        started = await claim_and_start(conn, settings)
        await transitions.finish_runs(
            conn, fence_of(started), [Outcome(False, "HTTP 502: x", http_status=502)]
        )
    cancelled = await api.post(f"/runs/{run['id']}/cancel", headers=admin)
    assert cancelled.status_code == 200, cancelled.text
    body = cancelled.json()
    assert body["status"] == "cancelled"
    assert [(e["attempt"], e["outcome"], e["http_status"]) for e in body["attempts"]] == [(1, "failed", 502)]


async def test_retry_after_sets_the_next_due_time_instead_of_the_backoff(
    settings: Settings, pool: asyncpg.Pool
) -> None:
    async with pool.acquire() as conn:
        rows = await factories.runs(conn, 2, max_attempts=3)
        started = await claim_and_start(conn, settings)
        by_id = {r["id"]: r for r in started}
        asked, backoff = (by_id[r["id"]] for r in rows)
        await transitions.finish_runs(
            conn,
            fence_of([asked, backoff]),
            [
                Outcome(False, "HTTP 429: slow down", http_status=429, retry_after=600),
                Outcome(False, "HTTP 500"),
            ],
        )
        due = dict(await conn.fetch("SELECT id, due_at - now() FROM job_runs"))
    assert timedelta(seconds=599) < due[asked["id"]] <= timedelta(seconds=600)
    assert due[backoff["id"]] < timedelta(seconds=1)  # the factory's backoff: 0.1 s


async def test_history_stays_bounded_by_max_attempts(
    settings: Settings, pool: asyncpg.Pool, api: httpx.AsyncClient, admin: dict
) -> None:
    """A run whose max_attempts was lowered under its history (the only way past it) keeps the newest."""
    async with pool.acquire() as conn:
        [run] = await factories.runs(conn, 1, max_attempts=3)
        for _ in range(3):
            started = await claim_and_start(conn, settings)
            await transitions.finish_runs(conn, fence_of(started), [Outcome(False, "HTTP 500")])
            await make_due(conn)
        await conn.execute("UPDATE job_runs SET status = 'pending', max_attempts = 2, attempt = 1")
        started = await claim_and_start(conn, settings)
        await transitions.finish_runs(conn, fence_of(started), [Outcome(False, "HTTP 503")])
        stored = await conn.fetchval("SELECT attempts FROM job_runs WHERE id = $1", run["id"])
    assert [e["error"] for e in stored] == ["HTTP 500", "HTTP 503"]
    shown = await read(api, admin, run["id"])
    assert [e["error"] for e in shown["attempts"]] == ["HTTP 500", "HTTP 503"]
