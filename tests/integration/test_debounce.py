"""Debounced runs: a key's submissions fold into one pending run, which moves its due time (never past
the first submission + max_delay_seconds) and runs once, with the latest payload. A run a claim got
first is left alone: the next submission starts the next window."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import nats
import orjson

from app.config import Settings
from app.engine.claims import claim_scan
from app.engine.engine import Engine
from app.engine.floor import ClaimBounds
from app.engine.keeper import FlowKeeper
from app.worker.consumer import Worker
from tests.receiver import running_receiver
from tests.support import api_client, put_job, run_reaching

DEBOUNCE = {"key": "payload.doc", "period_seconds": 60, "max_delay_seconds": 600}


def at(value: object) -> datetime:
    return datetime.fromisoformat(str(value))


async def submit(api: httpx.AsyncClient, auth: dict[str, str], **body: Any) -> httpx.Response:
    return await api.post("/tenants/acme/runs", json={"job": "doc", **body}, headers=auth)


async def runs_of(pool: asyncpg.Pool) -> list[asyncpg.Record]:
    return await pool.fetch("SELECT * FROM job_runs WHERE job = 'doc' ORDER BY created_at, id")


async def test_a_later_submission_replaces_the_payload_and_moves_the_due_time(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    job = await put_job(api, "acme", "doc", auth, debounce=DEBOUNCE)
    assert job["debounce"] == DEBOUNCE and job["unique"] is None
    first = await submit(api, auth, payload={"doc": 1, "v": 1})
    assert first.status_code == 201, first.text
    run = first.json()
    assert at(run["due_at"]) == at(run["scheduled_at"]) + timedelta(seconds=60)
    await asyncio.sleep(0.05)
    again = await submit(api, auth, payload={"doc": 1, "v": 2})
    assert again.status_code == 200
    folded = again.json()
    assert (
        folded["id"] == run["id"]
        and folded["payload"] == {"doc": 1, "v": 2}
        and folded["status"] == "pending"
    )
    assert at(folded["due_at"]) > at(run["due_at"]) and folded["scheduled_at"] == run["scheduled_at"]
    [row] = await runs_of(pool)
    queued = await pool.fetchval("SELECT due_at FROM run_queue WHERE id = $1", row["id"])
    assert queued == row["due_at"] == at(folded["due_at"])
    other = await submit(api, auth, payload={"doc": 2})
    assert other.status_code == 201 and other.json()["id"] != run["id"]


async def test_the_due_time_never_passes_the_first_submission_plus_max_delay(
    api: httpx.AsyncClient, tenant: dict
) -> None:
    auth = tenant["auth"]
    await put_job(api, "acme", "doc", auth, debounce=DEBOUNCE | {"max_delay_seconds": 70})
    # Submitted for 50 s ago: due in 10 s, and never later than in 20 s.
    since = datetime.now(UTC) - timedelta(seconds=50)
    first = (await submit(api, auth, payload={"doc": 1}, scheduled_at=since.isoformat())).json()
    assert at(first["due_at"]) == since + timedelta(seconds=60)
    for _ in range(2):
        folded = (await submit(api, auth, payload={"doc": 1, "later": True})).json()
        assert folded["id"] == first["id"] and at(folded["due_at"]) == since + timedelta(seconds=70)


async def test_a_claimed_run_is_left_alone_and_the_next_window_starts(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    await put_job(api, "acme", "doc", auth, debounce=DEBOUNCE)
    since = datetime.now(UTC) - timedelta(seconds=61)
    first = (await submit(api, auth, payload={"doc": 1, "v": 1}, scheduled_at=since.isoformat())).json()
    async with pool.acquire() as conn:
        [claimed] = await claim_scan(conn, settings, ClaimBounds())
    assert str(claimed["id"]) == first["id"]
    second = await submit(api, auth, payload={"doc": 1, "v": 2})
    assert second.status_code == 201 and second.json()["id"] != first["id"]
    left = (await api.get(f"/runs/{first['id']}", headers=auth)).json()
    assert left["status"] == "dispatched" and left["payload"] == {"doc": 1, "v": 1}
    assert left["epoch"] == claimed["epoch"]
    # A batch: the first item of the key makes the next run, the later ones fold into it.
    async with pool.acquire() as conn:
        await conn.execute(
            "UPDATE job_runs SET due_at = now() - interval '1s' WHERE id = $1", second.json()["id"]
        )
        [claimed] = await claim_scan(conn, settings, ClaimBounds())
    body = {"runs": [{"job": "doc", "payload": {"doc": 1, "v": v}} for v in (3, 4)]}
    batch = (await api.post("/tenants/acme/runs/batch", json=body, headers=auth)).json()
    assert batch["created"] == [True, False]
    assert batch["runs"][0] == batch["runs"][1] and batch["runs"][1]["payload"] == {"doc": 1, "v": 4}
    assert len(await runs_of(pool)) == 3


async def test_a_batch_folds_its_own_repeats(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    await put_job(api, "acme", "doc", auth, debounce=DEBOUNCE)
    body = {
        "runs": [{"job": "doc", "payload": p} for p in ({"doc": 1, "v": 1}, {"doc": 1, "v": 2}, {"doc": 2})]
    }
    r = await api.post("/tenants/acme/runs/batch", json=body, headers=auth)
    assert r.status_code == 201, r.text
    runs, created = r.json()["runs"], r.json()["created"]
    assert created == [True, False, True]
    assert (
        runs[0] == runs[1] and runs[0]["payload"] == {"doc": 1, "v": 2} and runs[2]["payload"] == {"doc": 2}
    )
    assert len(await runs_of(pool)) == 2


async def test_a_held_run_stays_held_as_its_due_time_moves(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    await put_job(api, "acme", "doc", auth, debounce=DEBOUNCE)
    assert (await api.post("/tenants/acme/jobs/doc/pause", headers=auth)).status_code == 200
    first = (await submit(api, auth, payload={"doc": 1, "v": 1})).json()
    assert first["held"] == "paused"
    await asyncio.sleep(0.05)
    folded = (await submit(api, auth, payload={"doc": 1, "v": 2})).json()
    assert folded["id"] == first["id"] and folded["held"] == "paused" and folded["payload"]["v"] == 2
    assert at(folded["due_at"]) > at(first["due_at"])
    row = await pool.fetchrow(
        "SELECT due_at = 'infinity' AS out_of_range, held_due_at FROM job_runs WHERE id = $1", first["id"]
    )
    assert row["out_of_range"]
    assert row["held_due_at"] == at(folded["due_at"])
    assert await pool.fetchval("SELECT state FROM run_queue WHERE id = $1", first["id"]) == 3  # held
    assert (await api.post("/tenants/acme/jobs/doc/resume", headers=auth)).status_code == 200
    resumed = (await api.get(f"/runs/{first['id']}", headers=auth)).json()
    assert resumed["held"] is None and resumed["due_at"] == folded["due_at"]


async def test_a_run_granted_its_concurrency_slot_is_on_its_way(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    await put_job(api, "acme", "doc", auth, debounce=DEBOUNCE, concurrency={"limit": 1})
    since = (datetime.now(UTC) - timedelta(seconds=61)).isoformat()
    first = (await submit(api, auth, payload={"doc": 1, "v": 1}, scheduled_at=since)).json()
    assert first["held"] == "concurrency"
    waiting = (await submit(api, auth, payload={"doc": 1, "v": 2}, scheduled_at=since)).json()
    assert waiting["id"] == first["id"] and waiting["held"] == "concurrency"  # still waiting: folded
    assert await FlowKeeper(settings, pool).step() == 1
    granted = await submit(api, auth, payload={"doc": 1, "v": 3})
    assert granted.status_code == 201 and granted.json()["id"] != first["id"]
    kept = (await api.get(f"/runs/{first['id']}", headers=auth)).json()
    assert kept["held"] is None and kept["payload"]["v"] == 2


async def test_concurrent_submissions_from_two_api_processes_make_one_run(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    await put_job(api, "acme", "doc", auth, debounce=DEBOUNCE)
    async with api_client(settings) as other:
        answers = await asyncio.gather(
            *(submit(client, auth, payload={"doc": 1, "i": i}) for i in range(12) for client in (api, other))
        )
    assert sorted(a.status_code for a in answers) == [200] * 23 + [201]
    assert len({a.json()["id"] for a in answers}) == 1
    # Each is answered with the run as it left it: its own payload; the run keeps the last one's.
    sent = [{"doc": 1, "i": i} for i in range(12) for _ in (api, other)]
    assert [a.json()["payload"] for a in answers] == sent
    [row] = await runs_of(pool)
    assert row["payload"] in sent


async def test_the_run_executes_once_with_the_latest_payload(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    nc = await nats.connect(settings.nats_url)
    stop = asyncio.Event()
    tasks = [
        asyncio.create_task(Engine(settings, pool, nc).run(stop)),
        asyncio.create_task(Worker(settings, pool, nc).run(stop)),
    ]
    try:
        async with running_receiver() as receiver:
            rule = {"key": "payload.doc", "period_seconds": 1, "max_delay_seconds": 30}
            await put_job(
                api, "acme", "doc", auth, target={"type": "http", "url": receiver.url}, debounce=rule
            )
            ids = set()
            for v in range(5):
                ids.add((await submit(api, auth, payload={"doc": 1, "v": v})).json()["id"])
                await asyncio.sleep(0.1)
            [run_id] = ids
            done = await run_reaching(api, run_id, auth, {"succeeded", "failed"})
            assert done["status"] == "succeeded"
            [call] = receiver.for_run(run_id)
            assert call.payload == {"doc": 1, "v": 4}
            # Its window closed when it was claimed: the next submission makes the next run.
            after = await submit(api, auth, payload={"doc": 1, "v": 5})
            assert after.status_code == 201
            await run_reaching(api, after.json()["id"], auth, {"succeeded"})
            assert len([c for c in receiver.calls if not c.is_callback]) == 2
    finally:
        stop.set()
        await asyncio.gather(*tasks)
        await nc.close()


async def test_a_claim_and_a_fold_at_the_same_instant_never_both_win(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    """Either the fold got the run first (still pending, the new payload, nothing claimed) or the
    claim did (dispatched with the payload it read, which nothing changes after, and the submission
    made the next window's run)."""
    auth = tenant["auth"]
    await put_job(api, "acme", "doc", auth, debounce=DEBOUNCE)
    since = (datetime.now(UTC) - timedelta(seconds=61)).isoformat()
    outcomes = set()
    for doc in range(12):
        first = (await submit(api, auth, payload={"doc": doc, "v": 1}, scheduled_at=since)).json()

        async def claim() -> list[asyncpg.Record]:
            async with pool.acquire() as conn:
                return await claim_scan(conn, settings, ClaimBounds())

        claimed, fold = await asyncio.gather(claim(), submit(api, auth, payload={"doc": doc, "v": 2}))
        run = await pool.fetchrow("SELECT status, payload FROM job_runs WHERE id = $1", first["id"])
        if claimed:
            [row] = claimed
            assert str(row["id"]) == first["id"] and run["status"] == "dispatched"
            assert orjson.loads(row["payload_json"]) == run["payload"] == {"doc": doc, "v": 1}
            assert fold.status_code == 201 and fold.json()["id"] != first["id"]
            outcomes.add("claimed")
        else:
            assert run["status"] == "pending" and run["payload"] == {"doc": doc, "v": 2}
            assert fold.status_code == 200 and fold.json()["id"] == first["id"]
            outcomes.add("folded")
        await pool.execute(
            "UPDATE job_runs SET status = 'cancelled' WHERE job = 'doc' AND status <> 'cancelled'"
        )
    assert outcomes
