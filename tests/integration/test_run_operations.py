"""Retry, reschedule and bulk actions over the API (issue 16 items 3-5): each transition, its
refusals (409 for the wrong status, 422 naming the field, 429 over the backlog quota) and that a
refusal writes nothing."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
import httpx
import pytest

from app.config import Settings
from app.db import transitions
from app.engine.claims import claim_scan
from app.engine.floor import ClaimBounds
from stack.eventually import eventually
from tests import factories
from tests.support import api_client, assert_error, bearer, create_tenant, put_job, snapshot, submit_run


def at(value: object) -> datetime:
    return datetime.fromisoformat(str(value))


async def set_status(pool: asyncpg.Pool, run_id: object, status: str, attempt: int = 0) -> None:
    await pool.execute(
        "UPDATE job_runs SET status = $2, attempt = $3, last_error = 'boom', finished_at = now() WHERE id = $1",
        uuid.UUID(str(run_id)),
        status,
        attempt,
    )


# ─── retry ───


async def test_retry_moves_a_failed_run_back_to_pending_with_a_new_epoch_and_its_history(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    run = await submit_run(api, "acme", tenant["auth"], job="hello")
    await set_status(pool, run["id"], "failed", attempt=3)

    r = await api.post(f"/runs/{run['id']}/retry", headers=tenant["auth"])
    assert r.status_code == 200, r.text
    retried = r.json()
    assert retried["status"] == "pending" and retried["epoch"] == run["epoch"] + 1
    assert retried["attempt"] == 3 and retried["max_attempts"] == 4  # one more attempt
    assert retried["last_error"] == "boom" and retried["finished_at"] is None  # history kept
    assert retried["scheduled_at"] == run["scheduled_at"] and retried["id"] == run["id"]
    assert abs(at(retried["due_at"]) - datetime.now(UTC)) < timedelta(seconds=30)

    # Now pending: a second retry is a conflict naming the status, and changes nothing.
    before = await snapshot(pool)
    assert_error(
        await api.post(f"/runs/{run['id']}/retry", headers=tenant["auth"]), 409, "conflict", "status"
    )
    assert await snapshot(pool) == before


async def test_retry_of_a_cancelled_run_with_a_new_bound(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    run = await submit_run(api, "acme", tenant["auth"], job="hello")
    await set_status(pool, run["id"], "cancelled", attempt=2)
    before = await snapshot(pool)
    for bad in (2, 1):  # not above the attempts made
        r = await api.post(f"/runs/{run['id']}/retry", json={"max_attempts": bad}, headers=tenant["auth"])
        assert_error(r, 422, "invalid_input", "max_attempts")
    for bad_body in ({"max_attempts": 0}, {"max_attempts": 101}, {"max_attempts": "x"}, {"other": 1}, [1]):
        r = await api.post(f"/runs/{run['id']}/retry", json=bad_body, headers=tenant["auth"])
        assert r.status_code == 422, r.text
    assert await snapshot(pool) == before

    r = await api.post(f"/runs/{run['id']}/retry", json={"max_attempts": 10}, headers=tenant["auth"])
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "pending" and r.json()["max_attempts"] == 10


async def test_retry_statuses_and_unknown_runs(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    run = await submit_run(api, "acme", tenant["auth"], job="hello")
    for status in ("pending", "dispatched", "running", "succeeded"):
        await pool.execute("UPDATE job_runs SET status = $2 WHERE id = $1", uuid.UUID(str(run["id"])), status)
        r = await api.post(f"/runs/{run['id']}/retry", headers=tenant["auth"])
        assert_error(r, 409, "conflict", "status")
    assert_error(await api.post(f"/runs/{uuid.uuid4()}/retry", headers=tenant["auth"]), 404, "not_found")
    assert_error(
        await api.post("/runs/ffffffff-ffff-ffff-ffff-ffffffffffff/retry", headers=tenant["auth"]),
        404,
        "not_found",
    )
    r = await api.post("/runs/not-a-uuid/retry", headers=tenant["auth"])
    assert_error(r, 422, "invalid_input", "run_id")


async def test_retries_stop_at_the_most_attempts_a_run_may_make_beside_a_calm_tenant(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    """A hostile tenant retrying one run as it fails, 130 times: each retry adds an attempt to its
    bound until it made 100, the contract's bound on max_attempts; then 409 naming `attempt`,
    nothing written (130 retries left max_attempts at 131, and as many entries of history). A bulk
    retry leaves such a run too, matched but not changed, and retries the others."""
    auth = tenant["auth"]
    calm = bearer((await create_tenant(api, "calm"))["api_key"])
    await put_job(api, "calm", "hello", calm)
    run = await submit_run(api, "acme", auth, job="hello")
    refusals = []
    for attempt in range(1, 131):
        await set_status(pool, run["id"], "failed", attempt=attempt)
        r = await api.post(f"/runs/{run['id']}/retry", headers=auth)
        if r.status_code == 200:
            assert r.json()["max_attempts"] == max(3, attempt + 1) and attempt < 100, r.text
        else:
            refusals.append(attempt)
            before = await snapshot(pool)
            body = assert_error(r, 409, "conflict", "attempt")
            assert "at most 100" in body["detail"]
            assert await snapshot(pool) == before
    assert refusals == list(range(100, 131))
    assert await pool.fetchval("SELECT max(max_attempts) FROM job_runs") == 100
    # A new bound cannot get past it either: 409 before the bound's own check.
    r = await api.post(f"/runs/{run['id']}/retry", json={"max_attempts": 100}, headers=auth)
    assert_error(r, 409, "conflict", "attempt")

    # Bulk: the run at the bound is matched, not changed; another failed run is retried.
    other = await submit_run(api, "acme", auth, job="hello")
    await set_status(pool, other["id"], "failed", attempt=3)
    assert await act(api, auth, action="retry", filter={"status": ["failed"]}) == {
        "matched": 2,
        "changed": 1,
        "next_cursor": None,
    }
    stuck = (await api.get(f"/runs/{run['id']}", headers=auth)).json()
    assert stuck["status"] == "failed" and stuck["max_attempts"] == 100
    assert (await api.get(f"/runs/{other['id']}", headers=auth)).json()["status"] == "pending"

    # The calm tenant's failed run is retried as ever.
    mine = await submit_run(api, "calm", calm, job="hello")
    await set_status(pool, mine["id"], "failed", attempt=3)
    r = await api.post(f"/runs/{mine['id']}/retry", headers=calm)
    assert r.status_code == 200 and r.json()["max_attempts"] == 4, r.text


async def test_retry_counts_against_the_backlog_quota(settings: Settings, pool: asyncpg.Pool) -> None:
    async with api_client(settings, tenant_max_pending=1) as api:
        auth = bearer((await create_tenant(api, "acme"))["api_key"])
        await put_job(api, "acme", "hello", auth)
        failed = await submit_run(api, "acme", auth, job="hello")
        await set_status(pool, failed["id"], "failed", attempt=1)
        # The backlog is full once the run takes the slot the failed one left; admission's count
        # of the backlog may be up to a second old, so the submission waits for it to refresh.
        submit = lambda: api.post("/tenants/acme/runs", json={"job": "hello"}, headers=auth)  # noqa: E731
        await eventually(submit, until=lambda r: r.status_code == 201, timeout=5, interval=0.2, what="a slot")
        before = await snapshot(pool)
        r = await api.post(f"/runs/{failed['id']}/retry", headers=auth)
        assert_error(r, 429, "over_quota", "tenant_id")
        assert await snapshot(pool) == before


# ─── reschedule ───


async def test_reschedule_moves_a_pending_run_later_and_earlier_keeping_its_id(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    scheduled = datetime.now(UTC) + timedelta(days=3)
    run = await submit_run(api, "acme", tenant["auth"], job="hello", scheduled_at=scheduled.isoformat())
    later = scheduled + timedelta(days=1)
    r = await api.post(
        f"/runs/{run['id']}/reschedule", json={"due_at": later.isoformat()}, headers=tenant["auth"]
    )
    assert r.status_code == 200, r.text
    assert at(r.json()["due_at"]) == later and r.json()["scheduled_at"] == run["scheduled_at"]

    # A past time means now; the id, scheduled_at and the partition stay.
    r = await api.post(
        f"/runs/{run['id']}/reschedule", json={"due_at": "2001-01-01T00:00:00Z"}, headers=tenant["auth"]
    )
    assert r.status_code == 200, r.text
    moved = r.json()
    assert moved["id"] == run["id"] and moved["scheduled_at"] == run["scheduled_at"]
    assert abs(at(moved["due_at"]) - datetime.now(UTC)) < timedelta(seconds=30)
    assert moved["epoch"] == run["epoch"] and moved["status"] == "pending"


async def test_a_run_moved_before_its_scheduled_at_is_claimed(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    """The claim prunes partitions by scheduled_at up to the database's clock; a run pulled forward
    raises the ceiling to its scheduled_at (claim_floor reads run_queue_pulled_forward)."""
    far = (datetime.now(UTC) + timedelta(days=2)).isoformat()
    run = await submit_run(api, "acme", tenant["auth"], job="hello", scheduled_at=far)
    other = await submit_run(api, "acme", tenant["auth"], job="hello", scheduled_at=far)
    bounds = ClaimBounds()
    async with pool.acquire() as conn:
        assert await claim_scan(conn, settings, bounds) == []  # not due yet
    r = await api.post(
        f"/runs/{run['id']}/reschedule", json={"due_at": "2020-01-01T00:00:00Z"}, headers=tenant["auth"]
    )
    assert r.status_code == 200, r.text
    async with pool.acquire() as conn:
        # A fresh read of the bounds (an engine that heard no NOTIFY) finds it, and only it.
        claimed = await claim_scan(conn, settings, ClaimBounds())
    assert [str(c["id"]) for c in claimed] == [run["id"]]
    row = await pool.fetchrow("SELECT status FROM job_runs WHERE id = $1", uuid.UUID(str(other["id"])))
    assert row["status"] == "pending"


async def test_a_run_moved_before_its_scheduled_at_counts_in_the_due_backlog(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    """The autoscaler's figure sees what the claim sees: a run pulled forward is due backlog."""
    far = (datetime.now(UTC) + timedelta(days=2)).isoformat()
    run = await submit_run(api, "acme", tenant["auth"], job="hello", scheduled_at=far)
    async with pool.acquire() as conn:
        assert await transitions.due_backlog(conn, 100) == (0.0, 0)
    r = await api.post(
        f"/runs/{run['id']}/reschedule", json={"due_at": "2020-01-01T00:00:00Z"}, headers=tenant["auth"]
    )
    assert r.status_code == 200, r.text
    async with pool.acquire() as conn:
        age, runs = await transitions.due_backlog(conn, 100)
    assert runs == 1 and age >= 0


async def test_the_notify_of_a_reschedule_raises_the_ceiling_at_once() -> None:
    bounds = ClaimBounds()
    ahead = datetime.now(UTC) + timedelta(days=5)
    bounds.include(ahead)
    assert bounds._reach == ahead  # what get() uses until the next read


async def test_reschedule_refusals_write_nothing(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    run = await submit_run(api, "acme", tenant["auth"], job="hello")
    url = f"/runs/{run['id']}/reschedule"
    before = await snapshot(pool)
    far = (datetime.now(UTC) + timedelta(days=400)).isoformat()
    for body in (
        {},
        {"due_at": "2030-01-01T00:00:00"},
        {"due_at": "soon"},
        {"due_at": far},
        {"due_at": None},
    ):
        assert_error(await api.post(url, json=body, headers=tenant["auth"]), 422, "invalid_input", "due_at")
    assert_error(
        await api.post(url, json={"due_at": "2027-06-01T00:00:00Z", "x": 1}, headers=tenant["auth"]),
        422,
        "invalid_input",
        "x",
    )
    assert await snapshot(pool) == before
    for status in ("dispatched", "running", "succeeded", "failed", "cancelled", "expired"):
        await pool.execute("UPDATE job_runs SET status = $2 WHERE id = $1", uuid.UUID(str(run["id"])), status)
        r = await api.post(url, json={"due_at": "2027-06-01T00:00:00Z"}, headers=tenant["auth"])
        assert_error(r, 409, "conflict", "status")
    assert_error(
        await api.post(
            f"/runs/{uuid.uuid4()}/reschedule",
            json={"due_at": "2027-06-01T00:00:00Z"},
            headers=tenant["auth"],
        ),
        404,
        "not_found",
    )


# ─── bulk actions ───


async def act(api: httpx.AsyncClient, auth: dict, **body: object) -> dict:
    r = await api.post("/tenants/acme/runs/actions", json=body, headers=auth)
    assert r.status_code == 200, r.text
    return dict(r.json())


async def test_bulk_cancel_by_filter_in_pages_is_idempotent_and_scoped(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    await put_job(api, "acme", "other", auth)
    batch = {"runs": [{"job": "hello"}] * 30 + [{"job": "other"}] * 5}
    assert (await api.post("/tenants/acme/runs/batch", json=batch, headers=auth)).status_code == 201
    beta = bearer((await create_tenant(api, "beta"))["api_key"])
    await put_job(api, "beta", "hello", beta)
    beta_run = await submit_run(api, "beta", beta, job="hello")

    page = await act(api, auth, action="cancel", filter={"job": "hello", "status": ["pending"]}, limit=20)
    assert page["matched"] == 20 and page["changed"] == 20 and page["next_cursor"]
    rest = await act(
        api, auth, action="cancel", filter={"job": "hello"}, limit=20, cursor=page["next_cursor"]
    )
    assert rest["matched"] == 10 and rest["changed"] == 10 and rest["next_cursor"] is None
    again = await act(api, auth, action="cancel", filter={"job": "hello"})
    assert again == {"matched": 30, "changed": 0, "next_cursor": None}  # none changed twice

    counts = dict(await pool.fetch("SELECT job || ':' || status, count(*) FROM job_runs GROUP BY 1"))
    assert counts == {"hello:cancelled": 30, "other:pending": 5, "hello:pending": 1}  # beta's run untouched
    assert (
        await pool.fetchval("SELECT status FROM job_runs WHERE id = $1", uuid.UUID(str(beta_run["id"])))
        == "pending"
    )

    # Retry them back, by ids and a time range.
    ids = [
        r["id"]
        for r in await pool.fetch(
            "SELECT id FROM job_runs WHERE tenant_id = 'acme' AND job = 'hello' LIMIT 7"
        )
    ]
    out = await act(
        api,
        auth,
        action="retry",
        filter={"ids": [str(i) for i in ids], "scheduled_after": "2000-01-01T00:00:00Z"},
    )
    assert out == {"matched": 7, "changed": 7, "next_cursor": None}
    epochs = await pool.fetch("SELECT status, epoch FROM job_runs WHERE id = ANY($1)", ids)
    assert {(r["status"], r["epoch"]) for r in epochs} == {("pending", 1)}


async def test_bulk_retry_within_the_backlog_quota(settings: Settings, pool: asyncpg.Pool) -> None:
    async with api_client(settings, tenant_max_pending=600) as api:
        auth = bearer((await create_tenant(api, "acme"))["api_key"])
        await put_job(api, "acme", "hello", auth)
        async with pool.acquire() as conn:
            await factories.runs(conn, 1000, job_name="hello", status="failed")
        await api.post("/tenants/acme/runs", json={"job": "hello"}, headers=auth)  # 1 pending
        # Chunks of 500: the first fits (501 pending), the second would pass 600: the answer stops there.
        out = await act(api, auth, action="retry", filter={"status": ["failed"]}, limit=10_000)
        assert out["changed"] == 500 and out["matched"] == 500 and out["next_cursor"]
        # Nothing fits now: 429, nothing written.
        before = await snapshot(pool)
        r = await api.post(
            "/tenants/acme/runs/actions",
            json={"action": "retry", "filter": {"status": ["failed"]}, "cursor": out["next_cursor"]},
            headers=auth,
        )
        assert_error(r, 429, "over_quota")
        assert await snapshot(pool) == before


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"action": "delete"}, "action"),
        ({}, "action"),
        ({"action": "cancel", "limit": 10_001}, "limit"),
        ({"action": "cancel", "limit": 0}, "limit"),
        ({"action": "cancel", "filter": {"status": ["done"]}}, "filter.status[0]"),
        ({"action": "cancel", "filter": {"status": []}}, "filter.status"),
        ({"action": "cancel", "filter": {"job": "no spaces"}}, "filter.job"),
        ({"action": "cancel", "filter": {"ids": ["x"]}}, "filter.ids[0]"),
        ({"action": "cancel", "filter": {"ids": ["ffffffff-ffff-ffff-ffff-ffffffffffff"]}}, "filter.ids"),
        (
            {"action": "cancel", "filter": {"scheduled_after": "2030-01-01T00:00:00"}},
            "filter.scheduled_after",
        ),
        ({"action": "cancel", "filter": {"scheduled_before": "yesterday"}}, "filter.scheduled_before"),
        (
            {
                "action": "cancel",
                "filter": {
                    "scheduled_after": "2030-01-02T00:00:00Z",
                    "scheduled_before": "2030-01-01T00:00:00Z",
                },
            },
            "filter.scheduled_after",
        ),
        ({"action": "cancel", "filter": {"tenant_id": "beta"}}, "filter.tenant_id"),
        ({"action": "cancel", "cursor": "not a cursor"}, "cursor"),
        ({"action": "cancel", "filter": []}, "filter"),
    ],
)
async def test_bulk_bad_input_names_the_field_and_writes_nothing(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool, body: dict, field: str
) -> None:
    await submit_run(api, "acme", tenant["auth"], job="hello")
    before = await snapshot(pool)
    r = await api.post("/tenants/acme/runs/actions", json=body, headers=tenant["auth"])
    assert_error(r, 422, "invalid_input", field)
    assert await snapshot(pool) == before


# ─── listing by time range ───


async def test_listing_by_scheduled_time_range(api: httpx.AsyncClient, tenant: dict) -> None:
    auth = tenant["auth"]
    for day in (1, 2, 3):
        await submit_run(api, "acme", auth, job="hello", scheduled_at=f"2026-12-0{day}T00:00:00Z")
    r = await api.get(
        "/tenants/acme/runs",
        params={"scheduled_after": "2026-12-02T00:00:00Z", "scheduled_before": "2026-12-03T00:00:00Z"},
        headers=auth,
    )
    assert r.status_code == 200, r.text
    assert [x["scheduled_at"] for x in r.json()["runs"]] == ["2026-12-02T00:00:00Z"]
    r = await api.get("/tenants/acme/runs", params={"scheduled_after": "2026-12-02T00:00:00"}, headers=auth)
    assert_error(r, 422, "invalid_input", "scheduled_after")
