"""A run posted over HTTP comes back by id with the fields of the contract."""

from __future__ import annotations

import httpx

RUN_FIELDS = {
    "id",
    "tenant_id",
    "job",
    "status",
    "scheduled_at",
    "due_at",
    "attempt",
    "max_attempts",
    "priority",
    "epoch",
    "payload",
    "created_at",
    "dispatched_at",
    "started_at",
    "finished_at",
    "last_error",
    "idempotency_key",
    "tags",
    "metadata",
    "callback",
    "attempts",
    "result",
    "result_truncated",
    "held",
    "expires_at",
    "dedupe_key",
    "group_id",
    "depends_on",
    "dependents",
}


async def test_submit_and_read_back(api: httpx.AsyncClient, tenant: dict) -> None:
    r = await api.post(
        "/tenants/acme/runs", json={"job": "hello", "payload": {"n": 1}}, headers=tenant["auth"]
    )
    assert r.status_code == 201, r.text
    run = r.json()
    assert set(run) == RUN_FIELDS
    assert run["status"] == "pending" and run["payload"] == {"n": 1} and run["attempt"] == 0
    got = await api.get(f"/runs/{run['id']}", headers=tenant["auth"])
    assert got.status_code == 200
    assert got.json() == run
