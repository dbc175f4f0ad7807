"""API -> engine -> NATS -> worker subprocess -> status, with a local webhook receiver."""

from __future__ import annotations

import asyncio
import signal

from standardwebhooks import Webhook

from tests.e2e.conftest import wait_for


async def put_hook(stack: dict, name: str = "hook", **fields) -> None:
    body = {"target": {"type": "http", "url": stack["receiver"].url, "headers": {"X-Team": "blue"}}, **fields}
    r = await stack["api"].put(f"/tenants/acme/jobs/{name}", json=body, headers=stack["auth"])
    assert r.status_code in (200, 201), r.text


async def submit(stack: dict, job: str = "hook", payload=None, **fields) -> dict:
    r = await stack["api"].post(
        "/tenants/acme/runs", json={"job": job, "payload": payload or {}, **fields}, headers=stack["auth"]
    )
    assert r.status_code == 201, r.text
    return dict(r.json())


async def test_success_with_exact_headers(stack: dict) -> None:
    await put_hook(stack)
    worker = stack["spawn"]("worker")
    await worker.wait_ready()
    run = await submit(stack, payload={"hello": "world"})
    done = await wait_for(stack["api"], run["id"], stack["auth"], {"succeeded", "failed"})
    assert done["status"] == "succeeded" and done["attempt"] == 1 and done["last_error"] is None
    [call] = stack["receiver"].for_run(run["id"])
    h = call.headers
    assert call.payload == {"hello": "world"}
    assert (
        h["scheduler-run-id"] == run["id"] and h["scheduler-attempt"] == "1" and h["scheduler-epoch"] == "1"
    )
    assert h["content-type"] == "application/json" and h["x-team"] == "blue"
    assert h["traceparent"].startswith("00-") and len(h["traceparent"].split("-")) == 4
    # The body is the payload, signed (Standard Webhooks, the spec's own library) with the run id.
    assert call.body == b'{"hello":"world"}' and h["webhook-id"] == run["id"]
    assert Webhook(stack["secret"]).verify(call.body, h) == {"hello": "world"}
    assert [(a["outcome"], a["http_status"]) for a in done["attempts"]] == [("succeeded", 200)]


async def test_retries_until_success(stack: dict) -> None:
    await put_hook(stack, max_attempts=5, backoff_seconds=0.2)
    await stack["spawn"]("worker").wait_ready()
    run = await submit(stack, payload={"statuses": [500, 500, 200]})
    done = await wait_for(stack["api"], run["id"], stack["auth"], {"succeeded", "failed"})
    assert done["status"] == "succeeded" and done["attempt"] == 3
    calls = stack["receiver"].for_run(run["id"])
    assert [c.headers["scheduler-attempt"] for c in calls] == ["1", "2", "3"]
    assert [c.headers["scheduler-epoch"] for c in calls] == ["1", "2", "3"]  # every retry is a new claim


async def test_fails_after_max_attempts_with_last_error(stack: dict) -> None:
    await put_hook(stack, max_attempts=2, backoff_seconds=0.1)
    await stack["spawn"]("worker").wait_ready()
    run = await submit(stack, payload={"statuses": [500]})
    done = await wait_for(stack["api"], run["id"], stack["auth"], {"succeeded", "failed"})
    assert done["status"] == "failed" and done["attempt"] == 2
    assert done["last_error"].startswith("HTTP 500")
    assert len(stack["receiver"].for_run(run["id"])) == 2
    assert [(a["outcome"], a["http_status"]) for a in done["attempts"]] == [("failed", 500)] * 2


async def test_a_timeout_is_a_failed_attempt_and_is_retried(stack: dict) -> None:
    await put_hook(stack, max_attempts=2, backoff_seconds=0.1, timeout_seconds=0.5)
    await stack["spawn"]("worker").wait_ready()
    run = await submit(stack, payload={"sleep": 2})
    done = await wait_for(stack["api"], run["id"], stack["auth"], {"succeeded", "failed"})
    assert done["status"] == "failed" and done["attempt"] == 2
    assert "timed out" in done["last_error"]
    assert len(stack["receiver"].for_run(run["id"])) == 2


async def test_python_and_noop_targets(stack: dict) -> None:
    api, auth = stack["api"], stack["auth"]
    for name, target in (("py", {"type": "python", "handler": "echo"}), ("nothing", {"type": "noop"})):
        r = await api.put(
            f"/tenants/acme/jobs/{name}", json={"target": target, "max_attempts": 1}, headers=auth
        )
        assert r.status_code == 201, r.text
    await stack["spawn"]("worker").wait_ready()
    ok = await submit(stack, job="py", payload={"sleep": 0.1})
    bad = await submit(stack, job="py", payload={"fail": "boom"})
    noop = await submit(stack, job="nothing")
    assert (await wait_for(api, ok["id"], auth, {"succeeded", "failed"}))["status"] == "succeeded"
    failed = await wait_for(api, bad["id"], auth, {"succeeded", "failed"})
    assert failed["status"] == "failed" and "boom" in failed["last_error"]
    assert (await wait_for(api, noop["id"], auth, {"succeeded", "failed"}))["status"] == "succeeded"


async def test_worker_killed_mid_run_is_rescued_under_a_new_epoch(stack: dict) -> None:
    await put_hook(stack, max_attempts=3, backoff_seconds=0.1, timeout_seconds=20)
    doomed = stack["spawn"]("worker")
    await doomed.wait_ready()
    run = await submit(stack, payload={"sleep": 3})
    receiver = stack["receiver"]
    for _ in range(200):
        if receiver.for_run(run["id"]):
            break
        await asyncio.sleep(0.05)
    doomed.signal(signal.SIGKILL)  # mid-request
    rescuer = stack["spawn"]("worker")
    await rescuer.wait_ready()
    done = await wait_for(stack["api"], run["id"], stack["auth"], {"succeeded", "failed"}, timeout=60)
    assert done["status"] == "succeeded" and done["epoch"] >= 2 and done["attempt"] == 2
    epochs = [c.headers["scheduler-epoch"] for c in receiver.for_run(run["id"])]
    assert epochs[0] == "1" and epochs[-1] == str(done["epoch"]) and len(set(epochs)) == len(epochs)
    metrics = await rescuer.metrics()
    assert "scheduler_run_outcomes_total" in metrics


async def test_a_cancelled_run_is_never_executed(stack: dict) -> None:
    await put_hook(stack)
    api, auth = stack["api"], stack["auth"]
    # Cancelled while pending (due in two seconds), and cancelled after the engine dispatched it.
    soon = (
        await api.post("/tenants/acme/runs", json={"job": "hook", "scheduled_at": _in(2)}, headers=auth)
    ).json()
    assert (await api.post(f"/runs/{soon['id']}/cancel", headers=auth)).json()["status"] == "cancelled"
    dispatched = await submit(stack)
    await wait_for(api, dispatched["id"], auth, {"dispatched"})
    assert (await api.post(f"/runs/{dispatched['id']}/cancel", headers=auth)).status_code == 200
    worker = stack["spawn"]("worker")
    await worker.wait_ready()
    witness = await submit(stack)  # proves the worker ran while the cancelled ones were around
    await wait_for(api, witness["id"], auth, {"succeeded"})
    await asyncio.sleep(2.5)
    for run in (soon, dispatched):
        assert (await api.get(f"/runs/{run['id']}", headers=auth)).json()["status"] == "cancelled"
        assert stack["receiver"].for_run(run["id"]) == []
    assert 'scheduler_stale_results_total{stage="start"}' in await worker.metrics()


def _in(seconds: float) -> str:
    from datetime import UTC, datetime, timedelta

    return (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat()
