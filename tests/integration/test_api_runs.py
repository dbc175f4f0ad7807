"""Runs: submit, idempotency, batches, read, list with keyset pagination, cancel, admission control."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
import httpx
import pytest

from app.config import Settings
from app.db.run_ids import scheduled_ms
from tests.support import (
    api_client,
    assert_error,
    bearer,
    count_rows,
    create_tenant,
    put_job,
    snapshot,
    submit_run,
)


def at(value: object) -> datetime:
    return datetime.fromisoformat(str(value))


def ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


# ─── submit ───


async def test_submit_defaults_to_now_and_the_jobs_settings(api: httpx.AsyncClient, tenant: dict) -> None:
    await put_job(api, "acme", "report", tenant["auth"], payload={"default": True}, max_attempts=7)
    before = datetime.now(UTC)
    run = await submit_run(api, "acme", tenant["auth"], job="report")
    assert run["status"] == "pending" and run["job"] == "report" and run["tenant_id"] == "acme"
    assert run["payload"] == {"default": True} and run["max_attempts"] == 7
    assert run["attempt"] == 0 and run["epoch"] == 0 and run["idempotency_key"] is None
    # Default scheduled_at is the database's now(): the same instant as created_at, and due at once.
    assert run["scheduled_at"] == run["created_at"] == run["due_at"]
    assert abs(at(run["scheduled_at"]) - before) < timedelta(seconds=5)
    # The id carries its partition: its leading 48 bits are scheduled_at in milliseconds.
    assert scheduled_ms(uuid.UUID(str(run["id"]))) == ms(at(run["scheduled_at"]))


async def test_priority_comes_from_the_job_unless_the_run_brings_one(
    api: httpx.AsyncClient, tenant: dict
) -> None:
    job = await put_job(api, "acme", "report", tenant["auth"])
    assert job["priority"] == 5  # the default, Oban's convention
    assert (await submit_run(api, "acme", tenant["auth"], job="report"))["priority"] == 5
    await put_job(api, "acme", "report", tenant["auth"], priority=2)
    run = await submit_run(api, "acme", tenant["auth"], job="report")
    assert run["priority"] == 2
    urgent = await submit_run(api, "acme", tenant["auth"], job="report", priority=0)
    assert urgent["priority"] == 0
    r = await api.get(f"/runs/{urgent['id']}", headers=tenant["auth"])
    assert r.json()["priority"] == 0
    r = await api.post(
        "/tenants/acme/runs/batch",
        json={"runs": [{"job": "report", "priority": 9}, {"job": "report"}]},
        headers=tenant["auth"],
    )
    assert [run["priority"] for run in r.json()["runs"]] == [9, 2]


async def test_priority_is_part_of_an_idempotent_body(api: httpx.AsyncClient, tenant: dict) -> None:
    """The same key with another priority is another request (422); with the same, a replay."""
    body = {"job": "hello", "idempotency_key": "k1", "priority": 1}
    first = await api.post("/tenants/acme/runs", json=body, headers=tenant["auth"])
    again = await api.post("/tenants/acme/runs", json=body, headers=tenant["auth"])
    assert first.status_code == 201 and again.status_code == 200 and again.json()["id"] == first.json()["id"]
    other = await api.post("/tenants/acme/runs", json={**body, "priority": 2}, headers=tenant["auth"])
    assert_error(other, 422, "invalid_input", field="idempotency_key")


async def test_submit_at_an_explicit_future_time(api: httpx.AsyncClient, tenant: dict) -> None:
    when = (datetime.now(UTC) + timedelta(days=3)).replace(microsecond=123456)
    local = when.astimezone(datetime.now().astimezone().tzinfo).isoformat()
    offset = when.astimezone(datetime.fromisoformat("2000-01-01T00:00:00+05:30").tzinfo).isoformat()
    for text in (local, offset):
        run = await submit_run(api, "acme", tenant["auth"], job="hello", scheduled_at=text, payload=[1, 2])
        assert at(run["scheduled_at"]) == when and at(run["due_at"]) == when
        assert run["payload"] == [1, 2]
        assert scheduled_ms(uuid.UUID(str(run["id"]))) == ms(when)


async def test_payloads_of_every_json_shape_round_trip(api: httpx.AsyncClient, tenant: dict) -> None:
    payloads = [[1, 2], [[1], [2, 3]], [], {}, "text", 3, 1.5, True, {"nested": [1, {"a": None}]}, [{"a": 1}]]
    r = await api.post(
        "/tenants/acme/runs/batch",
        json={"runs": [{"job": "hello", "payload": p} for p in payloads]},
        headers=tenant["auth"],
    )
    assert r.status_code == 201, r.text
    assert [run["payload"] for run in r.json()["runs"]] == payloads
    for payload in payloads:
        run = await submit_run(api, "acme", tenant["auth"], job="hello", payload=payload)
        got = await api.get(f"/runs/{run['id']}", headers=tenant["auth"])
        assert got.json()["payload"] == payload


async def test_get_run_and_unknown_ids(api: httpx.AsyncClient, tenant: dict) -> None:
    run = await submit_run(api, "acme", tenant["auth"], job="hello")
    r = await api.get(f"/runs/{run['id']}", headers=tenant["auth"])
    assert r.status_code == 200 and r.json() == run
    # A well-formed id that names no run: the same day's partition, another random tail.
    missing = uuid.UUID(int=(uuid.UUID(str(run["id"])).int ^ 0xFFFF))
    assert_error(await api.get(f"/runs/{missing}", headers=tenant["auth"]), 404, "not_found", field="run_id")
    assert_error(
        await api.get("/runs/not-a-uuid", headers=tenant["auth"]), 422, "invalid_input", field="run_id"
    )


@pytest.mark.parametrize(
    "run_id",
    [
        "00000000-0000-0000-0000-000000000000",
        "ffffffff-ffff-ffff-ffff-ffffffffffff",  # leading bits past year 9999
        "e8f6a1c2-5b7d-4e3f-9a1b-2c3d4e5f6a7b",  # a random UUIDv4
    ],
)
async def test_any_uuid_that_names_no_run_is_404(api: httpx.AsyncClient, tenant: dict, run_id: str) -> None:
    assert_error(await api.get(f"/runs/{run_id}", headers=tenant["auth"]), 404, "not_found", field="run_id")
    r = await api.post(f"/runs/{run_id}/cancel", headers=tenant["auth"])
    assert_error(r, 404, "not_found", field="run_id")


# ─── idempotency ───


async def test_idempotency_key_in_the_body(api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool) -> None:
    body = {"job": "hello", "payload": {"n": 1}, "idempotency_key": "order-1"}
    r1 = await api.post("/tenants/acme/runs", json=body, headers=tenant["auth"])
    assert r1.status_code == 201, r1.text
    assert r1.json()["idempotency_key"] == "order-1"
    r2 = await api.post("/tenants/acme/runs", json=body, headers=tenant["auth"])
    assert r2.status_code == 200, r2.text
    assert r2.json() == r1.json()
    assert await count_rows(pool, "job_runs") == 1

    before = await snapshot(pool)
    r3 = await api.post("/tenants/acme/runs", json={**body, "payload": {"n": 2}}, headers=tenant["auth"])
    assert_error(r3, 422, "invalid_input", field="idempotency_key")  # IETF Idempotency-Key draft
    assert await snapshot(pool) == before


async def test_idempotency_key_header(api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool) -> None:
    headers = {**tenant["auth"], "Idempotency-Key": "order-2"}
    body = {"job": "hello", "payload": {"n": 1}}
    r1 = await api.post("/tenants/acme/runs", json=body, headers=headers)
    assert r1.status_code == 201, r1.text
    assert r1.json()["idempotency_key"] == "order-2"
    r2 = await api.post("/tenants/acme/runs", json=body, headers=headers)
    assert r2.status_code == 200 and r2.json()["id"] == r1.json()["id"]
    # The header and the body field are the same key.
    r3 = await api.post(
        "/tenants/acme/runs", json={**body, "idempotency_key": "order-2"}, headers=tenant["auth"]
    )
    assert r3.status_code == 200 and r3.json()["id"] == r1.json()["id"]
    # Agreeing header and body are fine.
    r4 = await api.post("/tenants/acme/runs", json={**body, "idempotency_key": "order-2"}, headers=headers)
    assert r4.status_code == 200 and r4.json()["id"] == r1.json()["id"]
    assert await count_rows(pool, "job_runs") == 1

    before = await snapshot(pool)
    r5 = await api.post("/tenants/acme/runs", json={**body, "payload": {"n": 9}}, headers=headers)
    assert_error(r5, 422, "invalid_input", field="idempotency_key")
    r6 = await api.post("/tenants/acme/runs", json={**body, "idempotency_key": "other"}, headers=headers)
    assert_error(r6, 422, "invalid_input", field="idempotency_key")
    assert await snapshot(pool) == before


async def test_concurrent_requests_with_one_key_make_one_run(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    headers = {**tenant["auth"], "Idempotency-Key": "race"}
    same = [api.post("/tenants/acme/runs", json={"job": "hello"}, headers=headers) for _ in range(20)]
    responses = await asyncio.gather(*same)
    # One creates the run; the others replay it (200) or, while it is still in flight, get 409.
    codes = sorted(r.status_code for r in responses)
    assert codes.count(201) == 1 and set(codes) <= {200, 201, 409}, [r.text for r in responses]
    assert len({r.json()["id"] for r in responses if r.status_code != 409}) == 1
    assert await count_rows(pool, "job_runs") == 1

    headers = {**tenant["auth"], "Idempotency-Key": "race-2"}
    different = [
        api.post("/tenants/acme/runs", json={"job": "hello", "payload": {"n": i}}, headers=headers)
        for i in range(10)
    ]
    responses = await asyncio.gather(*different)
    # Another body under the same key: 422 once the first is committed, 409 while it is in flight.
    codes = sorted(r.status_code for r in responses)
    assert codes.count(201) == 1 and set(codes) <= {201, 409, 422}, [r.text for r in responses]
    assert await count_rows(pool, "job_runs") == 2


async def test_idempotency_keys_are_per_tenant(api: httpx.AsyncClient, tenant: dict) -> None:
    other = bearer((await create_tenant(api, "other"))["api_key"])
    await put_job(api, "other", "hello", other)
    mine = await submit_run(api, "acme", tenant["auth"], job="hello", idempotency_key="k")
    theirs = await submit_run(api, "other", other, job="hello", idempotency_key="k")
    assert mine["id"] != theirs["id"]


# ─── batches ───


async def test_batch_of_1000_answers_in_order(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    runs = [{"job": "hello", "payload": {"i": i}} for i in range(1000)]
    r = await api.post("/tenants/acme/runs/batch", json={"runs": runs}, headers=tenant["auth"])
    assert r.status_code == 201, r.text
    out = r.json()["runs"]
    assert [run["payload"]["i"] for run in out] == list(range(1000))
    assert len({run["id"] for run in out}) == 1000
    assert await count_rows(pool, "job_runs") == 1000


async def test_batch_over_the_limit_is_422_and_writes_nothing(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    r = await api.post(
        "/tenants/acme/runs/batch", json={"runs": [{"job": "hello"}] * 1001}, headers=tenant["auth"]
    )
    assert_error(r, 422, "invalid_input", field="runs")
    assert await count_rows(pool, "job_runs") == 0
    r = await api.post("/tenants/acme/runs/batch", json={"runs": []}, headers=tenant["auth"])
    assert_error(r, 422, "invalid_input", field="runs")


def _batch_with(index: int, bad: dict) -> dict:
    runs: list[dict] = [{"job": "hello", "payload": {"i": i}, "idempotency_key": f"b{i}"} for i in range(5)]
    runs[index] = {**runs[index], **bad}
    return {"runs": runs}


@pytest.mark.parametrize(
    ("index", "bad", "status", "error", "field"),
    [
        (3, {"job": "no-such-job"}, 422, "invalid_input", "runs[3].job"),
        (2, {"scheduled_at": "2030-01-01T00:00:00"}, 422, "invalid_input", "runs[2].scheduled_at"),
        (4, {"scheduled_at": "2999-01-01T00:00:00Z"}, 422, "invalid_input", "runs[4].scheduled_at"),
        (1, {"payload": {"blob": "x" * 70_000}}, 413, "payload_too_large", "runs[1].payload"),
        (0, {"urgency": 1}, 422, "invalid_input", "runs[0].urgency"),
        (4, {"idempotency_key": "b0"}, 422, "invalid_input", "runs[4].idempotency_key"),
        (2, {"priority": 10}, 422, "invalid_input", "runs[2].priority"),
        (1, {"priority": -1}, 422, "invalid_input", "runs[1].priority"),
        (3, {"priority": "1"}, 422, "invalid_input", "runs[3].priority"),
        (0, {"priority": 1.5}, 422, "invalid_input", "runs[0].priority"),
        (4, {"priority": True}, 422, "invalid_input", "runs[4].priority"),
    ],
    ids=[
        "unknown-job",
        "naive-datetime",
        "too-far",
        "oversize-payload",
        "unknown-field",
        "key-reused",
        "priority-over-9",
        "priority-negative",
        "priority-string",
        "priority-float",
        "priority-bool",
    ],
)
async def test_one_bad_item_fails_the_whole_batch(
    api: httpx.AsyncClient,
    tenant: dict,
    pool: asyncpg.Pool,
    index: int,
    bad: dict,
    status: int,
    error: str,
    field: str,
) -> None:
    before = await snapshot(pool)
    r = await api.post("/tenants/acme/runs/batch", json=_batch_with(index, bad), headers=tenant["auth"])
    assert_error(r, status, error, field=field)
    assert await snapshot(pool) == before  # all-or-nothing: no run, no idempotency key
    assert await count_rows(pool, "job_runs") == 0


async def test_batch_replays_and_in_batch_duplicates(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    first = await submit_run(api, "acme", tenant["auth"], job="hello", idempotency_key="a")
    batch = {
        "runs": [
            {"job": "hello", "idempotency_key": "a"},
            {"job": "hello", "idempotency_key": "b"},
            {"job": "hello", "idempotency_key": "b"},
            {"job": "hello"},
        ]
    }
    r = await api.post("/tenants/acme/runs/batch", json=batch, headers=tenant["auth"])
    assert r.status_code == 201, r.text
    ids = [run["id"] for run in r.json()["runs"]]
    assert ids[0] == first["id"]  # replay of an earlier request
    assert ids[1] == ids[2]  # the same key twice in one batch is one run
    assert len(set(ids)) == 3
    assert await count_rows(pool, "job_runs") == 3


# ─── listing ───


async def test_list_is_keyset_paginated_newest_first(api: httpx.AsyncClient, tenant: dict) -> None:
    base = (datetime.now(UTC) + timedelta(hours=1)).replace(microsecond=0)
    # 25 runs; some share a scheduled_at, so the id must break ties for the pages to be exact.
    times = [base + timedelta(minutes=i // 3) for i in range(25)]
    r = await api.post(
        "/tenants/acme/runs/batch",
        json={"runs": [{"job": "hello", "scheduled_at": t.isoformat()} for t in times]},
        headers=tenant["auth"],
    )
    assert r.status_code == 201, r.text
    expected = sorted(
        r.json()["runs"], key=lambda run: (at(run["scheduled_at"]), uuid.UUID(run["id"])), reverse=True
    )

    pages: list[list[dict]] = []
    cursor = None
    while True:
        params = {"limit": 10, **({"cursor": cursor} if cursor else {})}
        r = await api.get("/tenants/acme/runs", params=params, headers=tenant["auth"])
        assert r.status_code == 200, r.text
        pages.append(r.json()["runs"])
        cursor = r.json()["next_cursor"]
        if cursor is None:
            break
    assert [len(p) for p in pages] == [10, 10, 5]
    listed = [run for page in pages for run in page]
    assert [run["id"] for run in listed] == [
        run["id"] for run in expected
    ]  # no duplicates, no gaps, in order
    assert listed == expected


async def test_list_filters_by_status_and_job(api: httpx.AsyncClient, tenant: dict) -> None:
    await put_job(api, "acme", "other-job", tenant["auth"])
    hello = [await submit_run(api, "acme", tenant["auth"], job="hello") for _ in range(3)]
    other = [await submit_run(api, "acme", tenant["auth"], job="other-job") for _ in range(2)]
    cancelled = await api.post(f"/runs/{hello[0]['id']}/cancel", headers=tenant["auth"])
    assert cancelled.status_code == 200

    async def ids(**params: str) -> set[str]:
        r = await api.get("/tenants/acme/runs", params=params, headers=tenant["auth"])
        assert r.status_code == 200, r.text
        return {run["id"] for run in r.json()["runs"]}

    assert await ids() == {run["id"] for run in hello + other}
    assert await ids(job="other-job") == {run["id"] for run in other}
    assert await ids(status="cancelled") == {hello[0]["id"]}
    assert await ids(status="pending", job="hello") == {hello[1]["id"], hello[2]["id"]}
    assert await ids(status="succeeded") == set()


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"cursor": "not-a-cursor"}, "cursor"),
        ({"cursor": "bm90IHwgYSBjdXJzb3I="}, "cursor"),  # base64 of "not | a cursor"
        ({"cursor": "x" * 300}, "cursor"),
        ({"status": "sleeping"}, "status"),
        ({"limit": "0"}, "limit"),
        ({"limit": "501"}, "limit"),
        ({"job": "has space"}, "job"),
    ],
)
async def test_list_rejects_bad_parameters(
    api: httpx.AsyncClient, tenant: dict, params: dict, field: str
) -> None:
    r = await api.get("/tenants/acme/runs", params=params, headers=tenant["auth"])
    assert_error(r, 422, "invalid_input", field=field)


# ─── cancel ───


async def test_cancel_pending_then_again(api: httpx.AsyncClient, tenant: dict) -> None:
    run = await submit_run(api, "acme", tenant["auth"], job="hello")
    r = await api.post(f"/runs/{run['id']}/cancel", headers=tenant["auth"])
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "cancelled" and r.json()["finished_at"] is not None
    assert (await api.get(f"/runs/{run['id']}", headers=tenant["auth"])).json()["status"] == "cancelled"
    again = await api.post(f"/runs/{run['id']}/cancel", headers=tenant["auth"])
    assert_error(again, 409, "conflict", field="status")


@pytest.mark.parametrize(
    ("status", "code"), [("dispatched", 200), ("running", 200), ("succeeded", 409), ("failed", 409)]
)
async def test_cancel_by_state(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool, status: str, code: int
) -> None:
    run = await submit_run(api, "acme", tenant["auth"], job="hello")
    await pool.execute(
        "UPDATE job_runs SET status = $2, epoch = 1 WHERE id = $1", uuid.UUID(str(run["id"])), status
    )
    r = await api.post(f"/runs/{run['id']}/cancel", headers=tenant["auth"])
    assert r.status_code == code, r.text
    expected = "cancelled" if code == 200 else status
    assert (await api.get(f"/runs/{run['id']}", headers=tenant["auth"])).json()["status"] == expected


async def test_admin_reads_and_cancels_any_tenants_run(
    api: httpx.AsyncClient, tenant: dict, admin: dict
) -> None:
    run = await submit_run(api, "acme", tenant["auth"], job="hello")
    assert (await api.get(f"/runs/{run['id']}", headers=admin)).status_code == 200
    assert (await api.post(f"/runs/{run['id']}/cancel", headers=admin)).json()["status"] == "cancelled"


# ─── admission control ───


async def test_over_quota_is_429_with_retry_after_and_writes_nothing(
    settings: Settings, pool: asyncpg.Pool
) -> None:
    async with api_client(settings, tenant_max_pending=5) as api:
        full = bearer((await create_tenant(api, "full"))["api_key"])
        calm = bearer((await create_tenant(api, "calm"))["api_key"])
        for auth, tenant_id in ((full, "full"), (calm, "calm")):
            await put_job(api, tenant_id, "hello", auth)
        kept = [await submit_run(api, "full", full, job="hello", idempotency_key=f"k{i}") for i in range(5)]

        before = await snapshot(pool)
        r = await api.post("/tenants/full/runs", json={"job": "hello"}, headers=full)
        body = assert_error(r, 429, "over_quota", field="tenant_id")
        assert "5" in str(body["detail"])
        assert int(r.headers["Retry-After"]) > 0
        r = await api.post("/tenants/full/runs/batch", json={"runs": [{"job": "hello"}] * 2}, headers=full)
        assert_error(r, 429, "over_quota")
        assert await snapshot(pool) == before

        # A replay creates nothing, so it is not refused.
        r = await api.post("/tenants/full/runs", json={"job": "hello", "idempotency_key": "k0"}, headers=full)
        assert r.status_code == 200 and r.json()["id"] == kept[0]["id"]
        # Another tenant is unaffected.
        await submit_run(api, "calm", calm, job="hello")
        assert await count_rows(pool, "job_runs") == 6


async def test_a_batch_that_would_cross_the_quota_is_refused_whole(
    settings: Settings, pool: asyncpg.Pool
) -> None:
    async with api_client(settings, tenant_max_pending=5) as api:
        auth = bearer((await create_tenant(api, "acme"))["api_key"])
        await put_job(api, "acme", "hello", auth)
        for _ in range(3):
            await submit_run(api, "acme", auth, job="hello")
        r = await api.post("/tenants/acme/runs/batch", json={"runs": [{"job": "hello"}] * 3}, headers=auth)
        assert_error(r, 429, "over_quota")
        assert await count_rows(pool, "job_runs") == 3
        r = await api.post("/tenants/acme/runs/batch", json={"runs": [{"job": "hello"}] * 2}, headers=auth)
        assert r.status_code == 201, r.text
