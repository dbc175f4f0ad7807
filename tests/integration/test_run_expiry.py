"""A deadline to start (migration 0019): what a submission and a job may say (a 422 naming the field,
nothing written), the job's default, the engines' sweep ending runs not started by their deadline
(pending or held, no attempt consumed) and nothing else, the listing and bulk filters, the retry of
an expired run, two sweeps at once, the sweep's plan, and the way back down."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import nats
import pytest
from alembic import command
from prometheus_client import REGISTRY

from app.config import Settings
from app.db import cron as cron_repo
from app.db.connection import connect
from app.db.migrations import alembic_config
from app.db.queries import QUERIES
from app.db.transitions import EXPIRED_ERROR
from app.engine.engine import Engine
from app.engine.expiry import RunExpiry
from tests import factories
from tests.support import assert_error, put_job, run_reaching, snapshot, submit_run
from tests.ui_support import ui_sign_in

SOON = 1.5  # seconds: a deadline the tests wait out


def at(seconds: float) -> str:
    return (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat()


def expired_by(how: str) -> float:
    return REGISTRY.get_sample_value("scheduler_runs_expired_total", {"by": how}) or 0.0


async def row(pool: asyncpg.Pool, run_id: Any) -> dict[str, Any]:
    found = await pool.fetchrow("SELECT * FROM job_runs WHERE id = $1", uuid.UUID(str(run_id)))
    assert found is not None
    return dict(found)


BAD_RUNS = [
    ({"expires_at": "2030-01-01T00:00:00"}, "expires_at"),  # no timezone
    ({"expires_at": "soon"}, "expires_at"),
    ({"expires_at": 12}, "expires_at"),
    ({"expires_at": "2030-01-01T00:00:00Z", "scheduled_at": "2030-01-01T00:00:00Z"}, "expires_at"),
    ({"expires_at": "2030-01-01T00:00:00.5Z", "scheduled_at": "2030-01-01T00:00:00Z"}, "expires_at"),
    ({"expires_at": "2029-12-31T00:00:00Z", "scheduled_at": "2030-01-01T00:00:00Z"}, "expires_at"),
    ({"expires_at": "2030-02-01T00:00:01Z", "scheduled_at": "2030-01-01T00:00:00Z"}, "expires_at"),
    ({"expires_at": "2020-01-01T00:00:00Z"}, "expires_at"),  # before now, the run's time
    ({"expires_at": "9999-12-31T23:59:59-14:00"}, "expires_at"),  # no UTC form
]
# As JSON text: Python's parser (FastAPI's) reads NaN and Infinity, which httpx would not send.
BAD_JOBS = ["0", "0.5", "-1", "2678401", '"x"', "[]", "{}", "NaN", "Infinity", "1e400"]


@pytest.mark.parametrize(("fields", "field"), BAD_RUNS)
async def test_a_bad_deadline_on_a_run_is_a_422_naming_it_and_writes_nothing(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool, fields: dict, field: str
) -> None:
    before = await snapshot(pool)
    auth = tenant["auth"]
    r = await api.post("/tenants/acme/runs", json={"job": "hello", **fields}, headers=auth)
    assert_error(r, 422, "invalid_input", field)
    batch = {"runs": [{"job": "hello", "expires_at": at(60)}, {"job": "hello", **fields}]}
    r = await api.post("/tenants/acme/runs/batch", json=batch, headers=auth)
    assert_error(r, 422, "invalid_input", f"runs[1].{field}")
    assert await snapshot(pool) == before


@pytest.mark.parametrize("value", BAD_JOBS)
async def test_a_bad_expire_after_seconds_is_a_422_naming_it_and_writes_nothing(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool, value: str
) -> None:
    before = await snapshot(pool)
    headers = {**tenant["auth"], "Content-Type": "application/json"}
    for name in ("hello", "new"):  # a replace and a create
        body = '{"target": {"type": "noop"}, "expire_after_seconds": ' + value + "}"
        r = await api.put(f"/tenants/acme/jobs/{name}", content=body, headers=headers)
        assert_error(r, 422, "invalid_input", "expire_after_seconds")
    assert await snapshot(pool) == before


async def test_the_jobs_expire_after_seconds_is_each_runs_deadline_unless_it_brings_one(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    job = await put_job(api, "acme", "fresh", auth, expire_after_seconds=90)
    assert job["expire_after_seconds"] == 90
    assert (await api.get("/tenants/acme/jobs/fresh", headers=auth)).json()["expire_after_seconds"] == 90
    scheduled = datetime.now(UTC).replace(microsecond=0) + timedelta(days=1)
    run = await submit_run(api, "acme", auth, job="fresh", scheduled_at=scheduled.isoformat())
    assert datetime.fromisoformat(run["expires_at"]) == scheduled + timedelta(seconds=90)
    own = await submit_run(api, "acme", auth, job="fresh", expires_at=at(3600))
    assert datetime.fromisoformat(own["expires_at"]) > datetime.now(UTC) + timedelta(minutes=59)
    [first, second] = (
        await api.post(
            "/tenants/acme/runs/batch",
            json={"runs": [{"job": "fresh"}, {"job": "hello", "expires_at": at(60)}]},
            headers=auth,
        )
    ).json()["runs"]
    now_ish = datetime.fromisoformat(first["scheduled_at"])
    assert datetime.fromisoformat(first["expires_at"]) == now_ish + timedelta(seconds=90)
    assert second["expires_at"] is not None
    assert (await submit_run(api, "acme", auth, job="hello"))["expires_at"] is None  # no default: none
    body = {"job": "hello", "scheduled_at": "2030-01-01T09:00:00Z", "expires_at": "2030-01-01T08:00:00Z"}
    problem = assert_error(
        await api.post("/tenants/acme/runs", json=body, headers=auth), 422, "invalid_input"
    )
    assert problem["detail"] == (  # as docs/runs.md shows it
        "expires_at: must be 1 s to 31 days after scheduled_at (now when absent); it is -3600.0 s after"
    )
    async with pool.acquire() as conn:
        [occurrence] = await cron_repo.insert_cron_runs(conn, "acme", "fresh", [scheduled])
    assert (await row(pool, occurrence["id"]))["expires_at"] == scheduled + timedelta(seconds=90)


async def test_a_run_past_its_deadline_expires_pending_with_no_attempt_and_nothing_else_moves(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    sweep = RunExpiry(settings, pool)
    doomed = await submit_run(api, "acme", auth, job="hello", expires_at=at(SOON))
    plain = await submit_run(api, "acme", auth, job="hello")
    later = await submit_run(api, "acme", auth, job="hello", expires_at=at(3600))
    assert await sweep.step() == 0  # not yet
    untouched = {r["id"]: await row(pool, r["id"]) for r in (plain, later)}
    before = expired_by("sweep")
    await asyncio.sleep(SOON)
    assert await sweep.step() == 1
    assert expired_by("sweep") == before + 1
    run = (await api.get(f"/runs/{doomed['id']}", headers=auth)).json()
    assert (run["status"], run["attempt"], run["attempts"], run["started_at"]) == ("expired", 0, [], None)
    assert run["last_error"] == EXPIRED_ERROR
    assert datetime.fromisoformat(run["finished_at"]) >= datetime.fromisoformat(run["expires_at"])
    # The others are the rows they were.
    assert {r["id"]: await row(pool, r["id"]) for r in (plain, later)} == untouched
    queued = {r["id"] for r in await pool.fetch("SELECT id FROM run_queue")}
    assert queued == {uuid.UUID(plain["id"]), uuid.UUID(later["id"])}
    assert await sweep.step() == 0  # once

    listed = (await api.get("/tenants/acme/runs?status=expired", headers=auth)).json()["runs"]
    assert [r["id"] for r in listed] == [doomed["id"]]
    ui = await ui_sign_in(str(api.base_url), tenant["api_key"])  # the dashboard's view
    try:
        page = (await ui.get("/ui/runs?status=expired")).text
        assert doomed["id"] in page and plain["id"] not in page and 'class="badge status-expired"' in page
        page = (await ui.get(f"/ui/runs/{doomed['id']}")).text
        assert 'id="run-expires"' in page and "Retry this run" in page and "every 2s" not in page
    finally:
        await ui.aclose()
    # A bulk retry by status brings it back, due now, without the deadline it missed.
    body = {"action": "retry", "filter": {"status": ["expired"]}}
    r = await api.post("/tenants/acme/runs/actions", json=body, headers=auth)
    assert (r.status_code, r.json()["changed"]) == (200, 1), r.text
    retried = (await api.get(f"/runs/{doomed['id']}", headers=auth)).json()
    assert (retried["status"], retried["expires_at"], retried["attempt"]) == ("pending", None, 0)


async def test_a_retry_keeps_a_deadline_still_ahead(api: httpx.AsyncClient, tenant: dict) -> None:
    auth = tenant["auth"]
    run = await submit_run(api, "acme", auth, job="hello", expires_at=at(3600))
    assert (await api.post(f"/runs/{run['id']}/cancel", headers=auth)).json()["status"] == "cancelled"
    retried = (await api.post(f"/runs/{run['id']}/retry", headers=auth)).json()
    assert (retried["status"], retried["expires_at"]) == ("pending", run["expires_at"])


async def test_a_held_run_expires_under_a_running_engine(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    """The engine runs the sweep: a run of a paused job, held out of the claim's reach, still ends
    expired at its deadline, and its due time is what it was."""
    auth = tenant["auth"]
    assert (await api.post("/tenants/acme/jobs/hello/pause", headers=auth)).status_code == 200
    run = await submit_run(api, "acme", auth, job="hello", expires_at=at(SOON))
    waiting = await submit_run(api, "acme", auth, job="hello")  # held too, with no deadline
    assert run["held"] == "paused"
    fast = settings.model_copy(update={"expire_interval_seconds": 0.1})
    stop = asyncio.Event()
    nc = await nats.connect(fast.nats_url)
    engine = asyncio.create_task(Engine(fast, pool, nc).run(stop))
    try:
        done = await run_reaching(api, run["id"], auth, {"expired"}, timeout=SOON + 5)
    finally:
        stop.set()
        await engine
        await nc.close()
    assert (done["held"], done["attempt"], done["due_at"]) == (None, 0, run["due_at"])
    assert (await api.get(f"/runs/{waiting['id']}", headers=auth)).json()["held"] == "paused"


async def test_two_sweeps_at_once_split_the_work(settings: Settings, pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        runs = await factories.runs(conn, 3000)
        await conn.execute("UPDATE job_runs SET expires_at = scheduled_at + interval '1 second'")
    counts = await asyncio.gather(*(RunExpiry(settings, pool).step() for _ in range(2)))
    assert sum(counts) == len(runs)
    assert await pool.fetchval("SELECT count(*) FROM job_runs WHERE status = 'expired'") == len(runs)


def _index_scans(node: dict, out: set[str]) -> None:
    if node.get("Node Type") == "Seq Scan":
        out.add(f"seq:{node['Relation Name']}")
    if "Index Name" in node:
        out.add(node["Index Name"])
    for child in node.get("Plans", []):
        _index_scans(child, out)


async def test_the_sweep_reads_only_its_index(pool: asyncpg.Pool) -> None:
    """Beside 20,000 waiting runs, half of them with a deadline ahead, a sweep with nothing to
    expire is one probe of run_queue_expiring: a few buffers, no scan of the queue or the runs."""
    async with pool.acquire() as conn:
        await factories.runs(conn, 20_000)
        await conn.execute(
            "UPDATE job_runs SET expires_at = now() + interval '1 hour' WHERE id IN "
            "(SELECT id FROM job_runs ORDER BY id LIMIT 10000)"
        )
        await conn.execute("VACUUM ANALYZE run_queue")
        await conn.execute("ANALYZE job_runs")
        q = QUERIES["expire_runs"]
        args = q.args({"limit": 1000, "expired_error": EXPIRED_ERROR})
        async with conn.transaction():
            [plan] = await conn.fetchval("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + q.sql, *args)
    scans: set[str] = set()
    _index_scans(plan["Plan"], scans)
    assert "run_queue_expiring" in scans and not any(s.startswith("seq:run_queue") for s in scans), scans
    assert plan["Plan"]["Actual Rows"] == 0
    assert plan["Plan"]["Shared Hit Blocks"] + plan["Plan"].get("Shared Read Blocks", 0) <= 10, plan


async def test_a_downgrade_makes_expired_runs_cancelled_and_owes_no_callback(fresh_database: str) -> None:
    config = alembic_config(fresh_database)
    await asyncio.to_thread(command.upgrade, config, "head")
    conn = await connect(fresh_database)
    try:
        await factories.job(conn, "acme", "j")
        [run] = await factories.runs(conn, 1)
        hook = {"url": "http://127.0.0.1:9/", "on": ["cancelled", "expired"]}
        await conn.execute("UPDATE job_runs SET callback = $1, expires_at = now()", hook)
        await conn.execute("UPDATE job_runs SET status = 'expired', finished_at = now()")
        assert await conn.fetchval("SELECT count(*) FROM run_callbacks") == 1  # owed once, for expired
        await asyncio.to_thread(command.downgrade, config, "0018")
        assert await conn.fetchval("SELECT status FROM job_runs WHERE id = $1", run["id"]) == "cancelled"
        assert await conn.fetchval("SELECT count(*) FROM run_callbacks") == 1  # nothing more owed
        await asyncio.to_thread(command.upgrade, config, "head")
    finally:
        await conn.close()
