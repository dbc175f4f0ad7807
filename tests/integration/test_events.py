"""Events (fan-out) on real Postgres: one POST submits a run of every subscribed job of the tenant, in
one transaction (all or nothing, under the backlog quota), idempotent like a run's submission."""

from __future__ import annotations

import asyncpg
import httpx

from app.config import Settings
from tests.support import api_client, assert_error, create_tenant, put_job, snapshot


async def subscribe(api: httpx.AsyncClient, auth: dict, tenant: str, *names: str, **fields: object) -> None:
    for name in names:
        await put_job(api, tenant, name, auth, on_events=["order.placed", "order.placed"], **fields)


async def test_an_event_submits_a_run_of_every_subscribed_job(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    await subscribe(api, auth, "acme", "ship", "bill")
    await put_job(api, "acme", "audit", auth, on_events=["order.cancelled"], paused=True)
    job = (await api.get("/tenants/acme/jobs/ship", headers=auth)).json()
    assert job["on_events"] == ["order.placed"]  # a repeat counts once
    r = await api.post("/tenants/acme/events/order.placed", json={"payload": {"order": 42}}, headers=auth)
    assert r.status_code == 201, r.text
    runs = r.json()["runs"]
    assert [x["job"] for x in runs] == ["bill", "ship"] and all(x["payload"] == {"order": 42} for x in runs)
    # A paused job still gets its run, held.
    r = await api.post("/tenants/acme/events/order.cancelled", json={}, headers=auth)
    assert r.status_code == 201 and r.json()["runs"][0]["held"] == "paused", r.text
    # Nobody subscribed: 200, no runs, nothing written.
    before = await snapshot(pool)
    r = await api.post("/tenants/acme/events/nobody.listens", json={"payload": 1}, headers=auth)
    assert r.status_code == 200 and r.json() == {"runs": []}, r.text
    assert await snapshot(pool) == before


async def test_an_idempotency_key_replays_the_same_runs(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    await subscribe(api, auth, "acme", "ship", "bill")
    headers = {**auth, "Idempotency-Key": "evt-1"}
    first = await api.post("/tenants/acme/events/order.placed", json={"payload": {"o": 1}}, headers=headers)
    again = await api.post("/tenants/acme/events/order.placed", json={"payload": {"o": 1}}, headers=headers)
    assert first.status_code == 201 and again.status_code == 200, again.text
    assert [x["id"] for x in again.json()["runs"]] == [x["id"] for x in first.json()["runs"]]
    before = await snapshot(pool)
    other = await api.post("/tenants/acme/events/order.placed", json={"payload": {"o": 2}}, headers=headers)
    assert_error(other, 422, "invalid_input", "idempotency_key")
    assert await snapshot(pool) == before


async def test_an_event_over_the_quota_writes_nothing(settings: Settings, pool: asyncpg.Pool) -> None:
    async with api_client(settings, tenant_max_pending=4) as api:
        created = await create_tenant(api, "acme")
        auth = {"Authorization": f"Bearer {created['api_key']}"}
        await subscribe(api, auth, "acme", "a", "b", "c")
        r = await api.post("/tenants/acme/events/order.placed", json={}, headers=auth)
        assert r.status_code == 201, r.text
        before = await snapshot(pool)
        # One pending run of room, three subscribers: none is made.
        r = await api.post("/tenants/acme/events/order.placed", json={}, headers=auth)
        assert_error(r, 429, "over_quota")
        assert await snapshot(pool) == before


async def test_names_are_checked_and_tenants_apart(
    api: httpx.AsyncClient, tenant: dict, pool: asyncpg.Pool
) -> None:
    auth = tenant["auth"]
    await subscribe(api, auth, "acme", "ship")
    before = await snapshot(pool)
    for name in ("-dash", "a" * 129, "sp%20ace", "x%00y", "caf%C3%A9"):
        r = await api.post(f"/tenants/acme/events/{name}", json={}, headers=auth)
        assert_error(r, 422, "invalid_input", "name")
    r = await api.put(
        "/tenants/acme/jobs/bad", json={"target": {"type": "noop"}, "on_events": ["no spaces"]}, headers=auth
    )
    assert r.status_code == 422 and "on_events" in r.json().get("field", ""), r.text
    r = await api.put(
        "/tenants/acme/jobs/bad",
        json={"target": {"type": "noop"}, "on_events": [f"e{i}" for i in range(33)]},
        headers=auth,
    )
    assert r.status_code == 422, r.text
    r = await api.post("/tenants/acme/events/order.placed", json={"payload": {"x": "\u0000"}}, headers=auth)
    assert r.status_code == 422, r.text
    assert await snapshot(pool) == before
    # A hostile tenant beside a good one: its events make its runs only, and its bad ones fail alone.
    evil = await create_tenant(api, "evil")
    evil_auth = {"Authorization": f"Bearer {evil['api_key']}"}
    await subscribe(api, evil_auth, "evil", "ship")
    r = await api.post("/tenants/evil/events/order.placed", json={"payload": "x" * 10}, headers=evil_auth)
    assert r.status_code == 201 and [x["tenant_id"] for x in r.json()["runs"]] == ["evil"]
    r = await api.post("/tenants/acme/events/order.placed", json={}, headers=evil_auth)
    assert r.status_code in (401, 403, 404), r.text
    r = await api.post("/tenants/acme/events/order.placed", json={}, headers=auth)
    assert r.status_code == 201 and [x["tenant_id"] for x in r.json()["runs"]] == ["acme"]
