"""Groups end to end: the API with its engine, a worker subprocess, the receiver. A group's runs are
executed, its completion fires once: one run of its on_complete job carrying the counts, or one
signed callback (verified with `standardwebhooks`)."""

from __future__ import annotations

import asyncio

import httpx
import pytest_asyncio
from standardwebhooks import Webhook

from app.config import Settings
from stack.eventually import eventually
from tests.e2e.conftest import wait_for


@pytest_asyncio.fixture(loop_scope="session")
async def e2e_settings(e2e_settings: Settings) -> Settings:
    return e2e_settings.model_copy(update={"callback_poll_seconds": 0.2})


async def fired(api: httpx.AsyncClient, auth: dict, group_id: str, until: str = "fired_at") -> dict:
    async def read() -> dict:
        return dict((await api.get(f"/tenants/acme/groups/{group_id}", headers=auth)).json())

    return await eventually(read, until=lambda g: g[until] is not None, timeout=30, what=f"group {until}")


async def test_a_group_completes_into_one_run_of_its_job_with_the_counts(stack: dict) -> None:
    api, auth, receiver = stack["api"], stack["auth"], stack["receiver"]
    for name, target in (("step", {"type": "http", "url": receiver.url}), ("report", {"type": "noop"})):
        r = await api.put(
            f"/tenants/acme/jobs/{name}", json={"target": target, "max_attempts": 1}, headers=auth
        )
        assert r.status_code == 201, r.text
    await stack["spawn"]("worker").wait_ready()
    body = {
        "runs": [{"job": "step", "payload": {"statuses": [200]}}] * 3
        + [{"job": "step", "payload": {"statuses": [500]}}],
        "group": {"name": "import", "on_complete": {"job": "report", "payload": {"day": "monday"}}},
    }
    r = await api.post("/tenants/acme/runs/batch", json=body, headers=auth)
    assert r.status_code == 201, r.text
    group = await fired(api, auth, r.json()["group_id"])
    assert (group["succeeded"], group["failed"], group["total"], group["pending"]) == (3, 1, 4, 0)
    done = await wait_for(api, group["completion_run_id"], auth, {"succeeded"})
    assert done["job"] == "report"
    assert done["payload"] == {
        "day": "monday",
        "group": {
            "id": group["id"],
            "name": "import",
            "succeeded": 3,
            "failed": 1,
            "cancelled": 0,
            "expired": 0,
            "total": 4,
        },
    }
    await asyncio.sleep(2)  # a second completion would have been made by now
    runs = (await api.get("/tenants/acme/runs?job=report", headers=auth)).json()["runs"]
    assert [x["id"] for x in runs] == [done["id"]]


async def test_a_group_completes_into_one_signed_callback(stack: dict) -> None:
    api, auth, receiver = stack["api"], stack["auth"], stack["receiver"]
    r = await api.put("/tenants/acme/jobs/hello", json={"target": {"type": "noop"}}, headers=auth)
    assert r.status_code == 201, r.text
    await stack["spawn"]("worker").wait_ready()
    body = {
        "runs": [{"job": "hello"}] * 5,
        "group": {"name": "fan-in", "on_complete": {"callback": {"url": receiver.url}}},
    }
    r = await api.post("/tenants/acme/runs/batch", json=body, headers=auth)
    assert r.status_code == 201, r.text
    group_id = r.json()["group_id"]

    async def delivered() -> dict:
        return dict((await api.get(f"/tenants/acme/groups/{group_id}", headers=auth)).json())

    group = await eventually(
        delivered,
        until=lambda g: (g["callback"] or {}).get("status") == "delivered",
        timeout=30,
        what="delivery",
    )
    assert group["succeeded"] == 5 and group["completion_run_id"] is None
    await asyncio.sleep(1)
    calls = [c for c in receiver.calls if c.headers.get("scheduler-group-id") == group_id]
    assert len(calls) == 1
    verified = Webhook(stack["secret"]).verify(calls[0].body, calls[0].headers)
    assert verified["type"] == "group.completed"
    assert verified["data"]["id"] == group_id and verified["data"]["succeeded"] == 5
    assert verified["data"]["completed_at"] is not None
