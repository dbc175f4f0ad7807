"""Completion callbacks against real Postgres: what may be named (a 422 naming the field, nothing
written), the SSRF rule at submission, the outbox written in the terminal state's own transaction
(and only for runs that have a callback), the delivery fence, and partition retirement."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import asyncpg
import httpx
import pytest

from app.config import Settings
from app.db import callbacks as callback_repo
from app.db import partitions
from tests.support import api_client, assert_error, count_rows, snapshot

HOOK = "http://127.0.0.1:9/hook"  # never called here: no worker runs in these tests

BAD_CALLBACKS = [
    ({"on": ["succeeded"]}, "callback.url"),
    ({"url": "ftp://example.com/x"}, "callback.url"),
    ({"url": "not a url"}, "callback.url"),
    ({"url": HOOK, "on": ["done"]}, "callback.on[0]"),
    ({"url": HOOK, "on": []}, "callback.on"),
    ({"url": HOOK, "on": "succeeded"}, "callback.on"),
    ({"url": HOOK, "secret": "x"}, "callback.secret"),
    ("http://127.0.0.1:9/hook", "callback"),
    ({"url": "http://user:pw@127.0.0.1:9/hook"}, "callback.url"),
    ({"url": "http://169.254.169.254/latest/meta-data"}, "callback.url"),  # metadata: always refused
]


@pytest.mark.parametrize(("callback", "field"), BAD_CALLBACKS)
async def test_a_bad_callback_is_a_422_naming_the_field_and_writes_nothing(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool, callback: object, field: str
) -> None:
    before = await snapshot(pool)
    auth = tenant["auth"]
    r = await api.put(
        "/tenants/acme/jobs/cb", json={"target": {"type": "noop"}, "callback": callback}, headers=auth
    )
    assert_error(r, 422, "invalid_input", field)
    r = await api.post("/tenants/acme/runs", json={"job": "hello", "callback": callback}, headers=auth)
    assert_error(r, 422, "invalid_input", field)
    batch = {"runs": [{"job": "hello"}, {"job": "hello", "callback": callback}]}
    r = await api.post("/tenants/acme/runs/batch", json=batch, headers=auth)
    assert_error(r, 422, "invalid_input", f"runs[1].{field}")
    assert await snapshot(pool) == before


async def test_a_private_callback_url_is_refused_at_submission(settings: Settings, tenant: dict) -> None:
    async with api_client(settings, allow_private_targets=False) as strict:
        auth = tenant["auth"]
        body = {"target": {"type": "noop"}, "callback": {"url": "http://localhost:8000/x"}}
        r = await strict.put("/tenants/acme/jobs/cb", json=body, headers=auth)
        problem = assert_error(r, 422, "invalid_input", "callback.url")
        assert str(problem["detail"]).endswith("must resolve, and only to public addresses")
        r = await strict.post(
            "/tenants/acme/runs", json={"job": "hello", "callback": {"url": "http://10.1.2.3/"}}, headers=auth
        )
        assert_error(r, 422, "invalid_input", "callback.url")


async def test_job_and_run_callbacks_are_stored_and_shown(api: httpx.AsyncClient, tenant: dict) -> None:
    auth = tenant["auth"]
    r = await api.put(
        "/tenants/acme/jobs/cb",
        json={"target": {"type": "noop"}, "callback": {"url": HOOK, "on": ["failed", "failed"]}},
        headers=auth,
    )
    assert r.status_code == 201, r.text
    assert r.json()["callback"] == {"url": HOOK, "on": ["failed"]}
    inherited = (await api.post("/tenants/acme/runs", json={"job": "cb"}, headers=auth)).json()
    assert inherited["callback"] == {
        "url": HOOK,
        "on": ["failed"],
        "status": None,
        "attempts": 0,
        "last_error": None,
    }
    own = {"url": "http://127.0.0.1:9/other", "on": ["succeeded", "cancelled", "failed"]}
    r = await api.post("/tenants/acme/runs", json={"job": "cb", "callback": own}, headers=auth)
    assert r.json()["callback"]["url"] == own["url"] and r.json()["callback"]["on"] == own["on"]
    plain = (await api.post("/tenants/acme/runs", json={"job": "hello"}, headers=auth)).json()
    assert plain["callback"] is None


async def _submit(api: httpx.AsyncClient, auth: dict, callback: dict | None, **fields: object) -> dict:
    body = {"job": "hello", **fields, **({"callback": callback} if callback else {})}
    r = await api.post("/tenants/acme/runs", json=body, headers=auth)
    assert r.status_code == 201, r.text
    return dict(r.json())


async def _finish(pool: asyncpg.Pool, run_id: str, status: str) -> None:
    await pool.execute(
        "UPDATE job_runs SET status = $2, finished_at = now() WHERE id = $1::uuid", run_id, status
    )


async def test_the_obligation_is_recorded_with_the_terminal_state_and_only_when_owed(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    owed = await _submit(api, auth, {"url": HOOK})
    only_failed = await _submit(api, auth, {"url": HOOK, "on": ["failed"]})
    plain = await _submit(api, auth, None)
    for run in (owed, only_failed, plain):
        await pool.execute("UPDATE job_runs SET status = 'running' WHERE id = $1::uuid", run["id"])
    assert await count_rows(pool, "run_callbacks") == 0  # not terminal: nothing owed
    # Rolled back with the terminal state: never owed.
    async with pool.acquire() as conn:
        tx = conn.transaction()
        await tx.start()
        await conn.execute("UPDATE job_runs SET status = 'succeeded' WHERE id = $1::uuid", owed["id"])
        assert await conn.fetchval("SELECT count(*) FROM run_callbacks") == 1
        await tx.rollback()
    assert await count_rows(pool, "run_callbacks") == 0
    for run in (owed, only_failed, plain):
        await _finish(pool, run["id"], "succeeded")
    rows = await pool.fetch("SELECT run_id::text, tenant_id, url, status, attempts FROM run_callbacks")
    assert [dict(r) for r in rows] == [
        {"run_id": owed["id"], "tenant_id": "acme", "url": HOOK, "status": "pending", "attempts": 0}
    ]
    shown = (await api.get(f"/runs/{owed['id']}", headers=auth)).json()["callback"]
    assert shown["status"] == "pending" and shown["attempts"] == 0
    assert (await api.get(f"/runs/{only_failed['id']}", headers=auth)).json()["callback"]["status"] is None
    listed = (await api.get("/tenants/acme/runs", headers=auth)).json()["runs"]
    assert {r["id"]: (r["callback"] or {}).get("status") for r in listed}[owed["id"]] == "pending"


async def test_a_cancel_by_the_api_records_the_obligation(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    run = await _submit(api, auth, {"url": HOOK, "on": ["cancelled"]}, scheduled_at=later)
    cancelled = (await api.post(f"/runs/{run['id']}/cancel", headers=auth)).json()
    assert cancelled["status"] == "cancelled" and cancelled["callback"]["status"] == "pending"
    assert await count_rows(pool, "run_callbacks") == 1


async def test_an_outcome_is_recorded_only_under_the_claim_it_was_delivered_under(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    run = await _submit(api, tenant["auth"], {"url": HOOK})
    await _finish(pool, run["id"], "failed")
    outcome = {"ok": True, "error": None, "max_attempts": 3, "backoff_seconds": 0, "max_backoff_seconds": 0}
    async with pool.acquire() as conn:
        claim = {"busy": {}, "per_tenant": 8, "limit": 10, "lease_seconds": 0}
        [first] = await callback_repo.claim_callbacks(conn, owner="w1", **claim)
        # Its claim lapsed at once (lease 0): another deliverer takes it under a newer epoch.
        [second] = await callback_repo.claim_callbacks(conn, owner="w2", **claim)
        assert second["epoch"] == first["epoch"] + 1 and second["attempts"] == 2
        assert (
            await callback_repo.finish_callback(conn, id=first["id"], epoch=first["epoch"], **outcome) is None
        )
        status = await callback_repo.finish_callback(conn, id=second["id"], epoch=second["epoch"], **outcome)
        assert status == "delivered"


async def test_a_tenant_at_its_share_claims_nothing_more(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    for _ in range(3):
        run = await _submit(api, tenant["auth"], {"url": HOOK})
        await _finish(pool, run["id"], "succeeded")
    async with pool.acquire() as conn:
        args = {"per_tenant": 2, "limit": 10, "owner": "w", "lease_seconds": 30}
        assert len(await callback_repo.claim_callbacks(conn, busy={"acme": 2}, **args)) == 0
        assert len(await callback_repo.claim_callbacks(conn, busy={"acme": 1}, **args)) == 1
        assert len(await callback_repo.claim_callbacks(conn, busy={}, **args)) == 2


async def test_retirement_keeps_a_day_that_owes_a_callback_and_clears_its_outbox_with_it(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    day = (datetime.now(UTC) - timedelta(days=3)).date()
    at = datetime(day.year, day.month, day.day, 12, tzinfo=UTC).isoformat()
    async with pool.acquire() as conn:
        await partitions.create_day_partition(conn, day)
    run = await _submit(api, tenant["auth"], {"url": HOOK}, scheduled_at=at)
    await _finish(pool, run["id"], "succeeded")
    async with pool.acquire() as conn:
        assert await partitions.retire_day_partition(conn, day) == "kept"
        await conn.execute("UPDATE run_callbacks SET status = 'delivered'")
        async with conn.transaction():
            assert await partitions.retire_day_partition(conn, day) == "dropped"
    assert await count_rows(pool, "run_callbacks") == 0
