"""Completion callbacks end to end: API -> engine -> worker subprocess -> the run's terminal state ->
the outbox -> a worker POSTs the run to the receiver, signed (verified with `standardwebhooks`)."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

import httpx
import pytest_asyncio
from standardwebhooks import Webhook

from app.config import Settings
from tests.e2e.conftest import wait_for
from tests.support import create_tenant


@pytest_asyncio.fixture(loop_scope="session")
async def e2e_settings(e2e_settings: Settings) -> Settings:
    # Quick retries and a short timeout, so a failing receiver's whole bound passes in seconds.
    return e2e_settings.model_copy(
        update={
            "callback_backoff_seconds": 0.2,
            "callback_poll_seconds": 0.2,
            "callback_timeout_seconds": 1.0,
            "callback_max_attempts": 3,
            # Four slots, two per tenant: without the share, hanging receivers would take all four.
            "callback_concurrency": 4,
            "callback_tenant_concurrency": 2,
        }
    )


async def put_job(api: httpx.AsyncClient, auth: dict, tenant: str = "acme", **fields: object) -> None:
    r = await api.put(f"/tenants/{tenant}/jobs/cb", json={"target": {"type": "noop"}, **fields}, headers=auth)
    assert r.status_code in (200, 201), r.text


async def submit(api: httpx.AsyncClient, auth: dict, tenant: str = "acme", **fields: object) -> dict:
    r = await api.post(f"/tenants/{tenant}/runs", json={"job": "cb", **fields}, headers=auth)
    assert r.status_code == 201, r.text
    return dict(r.json())


async def callback_reaching(
    api: httpx.AsyncClient, run_id: str, auth: dict, statuses: set[str], timeout: float = 30
) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        run = (await api.get(f"/runs/{run_id}", headers=auth)).json()
        if (run["callback"] or {}).get("status") in statuses:
            return dict(run)
        assert time.monotonic() < deadline, f"callback of {run_id} never reached {statuses}: {run}"
        await asyncio.sleep(0.1)


def without_callback(run: dict) -> dict:
    return {k: v for k, v in run.items() if k != "callback"}


async def test_a_receiver_failing_twice_then_succeeding_gets_the_run_signed(stack: dict) -> None:
    api, auth, receiver = stack["api"], stack["auth"], stack["receiver"]
    await put_job(api, auth, callback={"url": receiver.url})
    await stack["spawn"]("worker").wait_ready()
    run = await submit(api, auth, payload={"statuses": [500, 500, 200]})
    done = await callback_reaching(api, run["id"], auth, {"delivered", "failed"})
    assert done["status"] == "succeeded" and done["attempt"] == 1  # the run's own outcome is untouched
    assert done["callback"]["status"] == "delivered" and done["callback"]["attempts"] == 3
    assert done["callback"]["last_error"].startswith("HTTP 500")
    calls = receiver.callbacks_for(run["id"])
    assert [c.headers["scheduler-callback-attempt"] for c in calls] == ["1", "2", "3"]
    assert len({c.headers["webhook-id"] for c in calls}) == 1  # one message, retried: receivers dedupe
    for call in calls:
        verified = Webhook(stack["secret"]).verify(call.body, call.headers)
        assert verified["type"] == "run.completed"
        # The run as GET /runs/{id} answers it (only its callback's delivery state moved on since).
        assert without_callback(verified["data"]) == without_callback(done)
        assert verified["data"]["callback"]["status"] == "delivering"
    assert receiver.for_run(run["id"]) == []  # a noop run: the only calls were the callback's


async def test_a_cancelled_run_and_a_failed_one_get_theirs_and_on_filters(stack: dict) -> None:
    api, auth, receiver = stack["api"], stack["auth"], stack["receiver"]
    await put_job(api, auth, callback={"url": receiver.url, "on": ["cancelled"]}, max_attempts=1)
    await stack["spawn"]("worker").wait_ready()
    later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    cancelled = await submit(api, auth, scheduled_at=later)
    assert (await api.post(f"/runs/{cancelled['id']}/cancel", headers=auth)).status_code == 200
    succeeded = await submit(api, auth)  # inherits on: [cancelled]: owes nothing
    py = {"type": "python", "handler": "echo"}
    r = await api.put("/tenants/acme/jobs/py", json={"target": py, "max_attempts": 1}, headers=auth)
    assert r.status_code == 201, r.text
    r = await api.post(
        "/tenants/acme/runs",
        json={"job": "py", "payload": {"fail": "boom"}, "callback": {"url": receiver.url, "on": ["failed"]}},
        headers=auth,
    )
    failed = r.json()
    got = await callback_reaching(api, cancelled["id"], auth, {"delivered"})
    assert got["status"] == "cancelled"
    [call] = receiver.callbacks_for(cancelled["id"])
    assert call.envelope["data"]["status"] == "cancelled"
    got = await callback_reaching(api, failed["id"], auth, {"delivered"})
    assert (
        got["status"] == "failed"
        and "boom" in receiver.callbacks_for(failed["id"])[0].envelope["data"]["last_error"]
    )
    done = await wait_for(api, succeeded["id"], auth, {"succeeded"})
    await asyncio.sleep(1.0)  # past several deliverer polls
    assert done["callback"]["status"] is None and receiver.callbacks_for(succeeded["id"]) == []


async def test_a_hostile_receiver_fails_alone_beside_a_well_behaved_tenant(stack: dict) -> None:
    api, auth, receiver = stack["api"], stack["auth"], stack["receiver"]
    evil = await create_tenant(api, "evil")
    evil_auth = {"Authorization": f"Bearer {evil['api_key']}"}
    await put_job(api, evil_auth, tenant="evil", callback={"url": receiver.url})
    await put_job(api, auth, callback={"url": receiver.url})
    await stack["spawn"]("worker").wait_ready()
    hostile = {
        "hang": {"hang": 30},
        "500 forever": {"statuses": [500]},
        "huge": {"huge": 64 * 1024 * 1024, "status": 500},
        "redirect to metadata": {"redirect": "http://169.254.169.254/latest/meta-data/"},
    }
    bad = {name: await submit(api, evil_auth, "evil", payload=p) for name, p in hostile.items()}
    # Six rounds of the four slots' worth of hanging receivers: without the per-tenant share, the good
    # tenant's callbacks would wait about six seconds behind them (measured: the test then fails).
    r = await api.post(
        "/tenants/evil/runs/batch",
        json={"runs": [{"job": "cb", "payload": {"hang": 30}} for _ in range(24)]},
        headers=evil_auth,
    )
    assert r.status_code == 201, r.text
    hangers = r.json()["runs"]
    await asyncio.sleep(1.0)  # the hangers hold the evil tenant's share of the deliverer
    started = time.monotonic()
    good = [await submit(api, auth, payload={"n": i}) for i in range(5)]
    for run in good:
        done = await callback_reaching(api, run["id"], auth, {"delivered", "failed"}, timeout=20)
        assert done["callback"]["status"] == "delivered" and done["callback"]["attempts"] == 1
    good_seconds = time.monotonic() - started
    assert good_seconds < 3, f"the good tenant's callbacks waited {good_seconds:.1f}s behind the hostile one"
    errors = {}
    for name, run in [*bad.items(), *(("hang", r) for r in hangers)]:
        done = await callback_reaching(api, run["id"], evil_auth, {"delivered", "failed"}, timeout=120)
        assert done["status"] == "succeeded", done  # the run's own outcome is untouched
        assert done["callback"]["status"] == "failed" and done["callback"]["attempts"] == 3, (name, done)
        errors[name] = done["callback"]["last_error"]
    assert errors["hang"].startswith("timed out after 1s")
    assert errors["500 forever"].startswith("HTTP 500")
    assert errors["huge"].startswith("HTTP 500") and len(errors["huge"]) < 1000
    assert errors["redirect to metadata"].startswith("HTTP 302")  # redirects are never followed
    assert any(c.behaviour == "hang" and c.abandoned for c in receiver.calls)


async def test_the_ssrf_rule_is_applied_again_at_delivery(stack: dict) -> None:
    api, auth, receiver = stack["api"], stack["auth"], stack["receiver"]
    # The API accepted the receiver's loopback address (its deployment allowed private targets);
    # the worker's rule refuses it now, as when a name re-resolves to a private address after submission.
    await put_job(api, auth, callback={"url": receiver.url})
    await stack["spawn"]("worker", SCHEDULER_ALLOW_PRIVATE_TARGETS="false").wait_ready()
    run = await submit(api, auth)
    done = await callback_reaching(api, run["id"], auth, {"delivered", "failed"})
    assert done["callback"]["status"] == "failed" and done["callback"]["attempts"] == 3
    assert "callback.url host '127.0.0.1' must resolve, and only to public" in done["callback"]["last_error"]
    assert receiver.callbacks_for(run["id"]) == []
