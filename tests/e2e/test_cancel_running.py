"""Cancelling running runs end to end: the API (with its engine) in this process, real `scheduler
worker` processes, Postgres, NATS and a local receiver. The worker executing a cancelled run stops
within 2 s (the receiver sees its connection closed, a python handler sees CancelledError), the run
ends `cancelled` with that attempt `cancelled`, and nothing follows: no retry, no outcome."""

from __future__ import annotations

import asyncio
import random
import re
import signal
import time
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import nats
import pytest_asyncio

from app.config import Settings
from app.worker.consumer import Worker
from app.worker.targets import RunContext
from stack.eventually import eventually
from tests.e2e.conftest import wait_for
from tests.e2e.test_worker import put_hook, submit
from tests.processes import processes
from tests.receiver import Call

STOP_WITHIN = 2.0
# Workers whose heartbeat comes every 10 s: what stops a run within 2 s is the cancel's notice.
SLOW_BEAT = {"SCHEDULER_LEASE_SECONDS": "30"}


@pytest_asyncio.fixture(loop_scope="session")
async def e2e_settings(e2e_settings: Settings) -> Settings:
    """The stack's, with a message per run, so that runs spread over workers run by run."""
    return e2e_settings.model_copy(update={"message_runs": 1})


def counter(metrics_text: str, name: str, **labels: str) -> float:
    inside = ",".join(f'{k}="{v}"' for k, v in labels.items())
    m = re.search(rf"^{name}\{{{inside}\}} (\S+)$", metrics_text, re.M)
    return float(m.group(1)) if m else 0.0


async def the_call(stack: dict, run_id: str) -> Call:
    calls = await eventually(
        lambda: stack["receiver"].for_run(run_id), until=bool, timeout=30, what="the call arrives"
    )
    return calls[0]


async def closed(call: Call, timeout: float = 10.0) -> float:
    """When the receiver saw the caller hang up (time.monotonic())."""
    await eventually(lambda: call.ended, until=lambda e: e is not None, timeout=timeout, what="the call ends")
    assert call.abandoned, "the call was answered, not aborted"
    assert call.ended is not None
    return call.ended


async def cancel(stack: dict, run_id: str, api: Any = None) -> tuple[float, dict]:
    """(when the cancel was sent, the answer)."""
    sent = time.monotonic()
    r = await (api or stack["api"]).post(f"/runs/{run_id}/cancel", headers=stack["auth"])
    assert r.status_code == 200, r.text
    return sent, r.json()


async def assert_ended_cancelled(stack: dict, run_id: str, calls: int = 1) -> None:
    """Cancelled, its one attempt `cancelled`, and still so a moment later: no retry, no outcome."""
    await asyncio.sleep(1.5)
    run = (await stack["api"].get(f"/runs/{run_id}", headers=stack["auth"])).json()
    assert run["status"] == "cancelled" and run["attempt"] == 1, run
    assert [e["outcome"] for e in run["attempts"]] == ["cancelled"], run
    assert run["result"] is None
    assert len(stack["receiver"].for_run(run_id)) == calls


async def test_a_hanging_webhook_is_aborted_within_two_seconds(stack: dict) -> None:
    await put_hook(stack, max_attempts=3, backoff_seconds=0.1, timeout_seconds=120)
    worker = stack["spawn"]("worker", **SLOW_BEAT)
    await worker.wait_ready()
    run = await submit(stack, payload={"hang": 120})
    call = await the_call(stack, run["id"])
    await wait_for(stack["api"], run["id"], stack["auth"], {"running"})

    sent, answer = await cancel(stack, run["id"])
    assert answer["status"] == "cancelled" and [e["outcome"] for e in answer["attempts"]] == ["cancelled"]
    assert await closed(call) - sent < STOP_WITHIN
    await assert_ended_cancelled(stack, run["id"])
    metrics = await worker.metrics()
    assert counter(metrics, "scheduler_worker_attempts_stopped_total", via="notice") == 1
    assert counter(metrics, "scheduler_worker_attempts_stopped_total", via="heartbeat") == 0
    recorded = re.findall(r"^scheduler_run_outcomes_total\{.*\} (\S+)$", metrics, re.M)
    assert sum(map(float, recorded)) == 0  # the worker recorded nothing
    api_metrics = (await stack["api"].get("/metrics")).text
    assert counter(api_metrics, "scheduler_runs_cancelled_while_running_total", via="run") >= 1
    assert counter(api_metrics, "scheduler_cancel_notices_total", result="sent") >= 1


async def test_a_python_handler_sees_cancelled_error(stack: dict, e2e_settings: Settings) -> None:
    """A worker in this process, whose `echo` handler is a probe: it sees CancelledError where it
    awaits; one that swallows it and returns changes nothing either."""
    api, auth = stack["api"], stack["auth"]
    r = await api.put(
        "/tenants/acme/jobs/py",
        json={"target": {"type": "python", "handler": "echo"}, "max_attempts": 3, "timeout_seconds": 120},
        headers=auth,
    )
    assert r.status_code == 201, r.text
    started: dict[str, asyncio.Event] = {}
    saw_cancel: dict[str, asyncio.Event] = {}
    saw_cancel_at: dict[str, float] = {}

    def event(events: dict[str, asyncio.Event], run_id: str) -> asyncio.Event:
        return events.setdefault(run_id, asyncio.Event())

    async def probe(payload: Any, context: RunContext) -> Any:
        event(started, context.run_id).set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            saw_cancel_at[context.run_id] = time.monotonic()
            event(saw_cancel, context.run_id).set()
            if payload.get("swallow"):
                return "finished anyway"
            raise
        return None

    settings = e2e_settings.model_copy(update={"lease_seconds": 30.0})
    assert settings.database_url
    pool = await asyncpg.create_pool(settings.database_url, min_size=1, max_size=5)
    nc = await nats.connect(settings.nats_url)
    stop = asyncio.Event()
    worker = asyncio.create_task(Worker(settings, pool, nc, handlers={"echo": probe}).run(stop))
    try:
        for payload in ({}, {"swallow": True}):
            run = await submit(stack, job="py", payload=payload)
            await asyncio.wait_for(event(started, run["id"]).wait(), 30)
            sent, _ = await cancel(stack, run["id"])
            await asyncio.wait_for(event(saw_cancel, run["id"]).wait(), 5)
            assert saw_cancel_at[run["id"]] - sent < STOP_WITHIN
            await assert_ended_cancelled(stack, run["id"], calls=0)
    finally:
        stop.set()
        await asyncio.wait_for(worker, 30)
        await nc.close()
        await pool.close()


async def test_cancel_racing_finishing_attempts_ends_each_one_way(stack: dict) -> None:
    """Cancels sent around the moment each webhook answers: a run ends succeeded (the cancel is 409)
    or cancelled (its attempt `cancelled`), never both, and its history says the same."""
    api, auth, receiver = stack["api"], stack["auth"], stack["receiver"]
    await put_hook(stack, max_attempts=3, backoff_seconds=0.1, timeout_seconds=30)
    await stack["spawn"]("worker", **SLOW_BEAT).wait_ready()
    n = 24
    r = await api.post(
        "/tenants/acme/runs/batch",
        json={"runs": [{"job": "hook", "payload": {"sleep": 1.0}}] * n},
        headers=auth,
    )
    assert r.status_code == 201, r.text
    ids = [run["id"] for run in r.json()["runs"]]

    async def cancel_near_the_answer(run_id: str) -> int:
        call = await the_call(stack, run_id)
        await asyncio.sleep(max(0.0, call.started + 1.0 + random.uniform(-0.3, 0.3) - time.monotonic()))
        return (await api.post(f"/runs/{run_id}/cancel", headers=auth)).status_code

    answers = await asyncio.gather(*(cancel_near_the_answer(run_id) for run_id in ids))
    await asyncio.sleep(1.5)  # any late outcome or retry would have come by now
    seen = set()
    for run_id, answer in zip(ids, answers, strict=True):
        run = (await api.get(f"/runs/{run_id}", headers=auth)).json()
        outcomes = [e["outcome"] for e in run["attempts"]]
        seen.add(run["status"])
        assert (run["status"], answer, outcomes) in (
            ("succeeded", 409, ["succeeded"]),
            ("cancelled", 200, ["cancelled"]),
        ), run
        assert run["attempt"] == 1 and len(receiver.for_run(run_id)) == 1
    assert seen == {"succeeded", "cancelled"}, "the race did not happen both ways"


async def test_a_stalled_workers_late_finish_changes_nothing(stack: dict) -> None:
    """The worker is stopped (SIGSTOP) mid-call; the run is cancelled; the webhook answers
    meanwhile. Resumed, the worker has the answer and the notice in hand: whichever it takes first,
    the run stays cancelled and its history unchanged."""
    await put_hook(stack, max_attempts=3, backoff_seconds=0.1, timeout_seconds=30)
    worker = stack["spawn"]("worker", **SLOW_BEAT)
    await worker.wait_ready()
    run = await submit(stack, payload={"sleep": 1.0})
    await the_call(stack, run["id"])
    await wait_for(stack["api"], run["id"], stack["auth"], {"running"})
    worker.signal(signal.SIGSTOP)
    try:
        _, answer = await cancel(stack, run["id"])
        await asyncio.sleep(2.0)  # the webhook answered into the stopped worker's socket
    finally:
        worker.signal(signal.SIGCONT)
    await assert_ended_cancelled(stack, run["id"])
    after = (await stack["api"].get(f"/runs/{run['id']}", headers=stack["auth"])).json()
    assert after["attempts"] == answer["attempts"] and after["finished_at"] == answer["finished_at"]
    metrics = await worker.metrics()
    stale = counter(metrics, "scheduler_stale_results_total", stage="finish")
    stopped = counter(metrics, "scheduler_worker_attempts_stopped_total", via="notice")
    assert stale + stopped >= 1  # its outcome was fenced out, or it was stopped before it had one


async def test_without_the_notice_the_heartbeat_stops_the_run(
    stack: dict, e2e_settings: Settings, tmp_path: Path
) -> None:
    """Cancelled through an API process that cannot reach NATS: no notice is sent, and the worker
    stops the run at its next heartbeat (every second here: a lease of 3 s)."""
    await put_hook(stack, max_attempts=3, backoff_seconds=0.1, timeout_seconds=120)
    worker = stack["spawn"]("worker", SCHEDULER_LEASE_SECONDS="3")
    async with processes(e2e_settings, tmp_path) as spawn:
        cut_off = spawn("api", SCHEDULER_ENGINE="off", SCHEDULER_NATS_URL="nats://127.0.0.1:9")
        await asyncio.gather(worker.wait_ready(), cut_off.wait_ready())
        run = await submit(stack, payload={"hang": 120})
        call = await the_call(stack, run["id"])
        await wait_for(stack["api"], run["id"], stack["auth"], {"running"})
        async with httpx.AsyncClient(base_url=cut_off.base_url, timeout=10) as other:
            sent, _ = await cancel(stack, run["id"], api=other)
            # One heartbeat interval (1 s), its read, and the abort.
            assert await closed(call) - sent < 1.0 + STOP_WITHIN
            api_metrics = (await other.get("/metrics")).text
        assert counter(api_metrics, "scheduler_cancel_notices_total", result="unsent") == 1
    await assert_ended_cancelled(stack, run["id"])
    metrics = await worker.metrics()
    assert counter(metrics, "scheduler_worker_attempts_stopped_total", via="heartbeat") == 1
    assert counter(metrics, "scheduler_worker_attempts_stopped_total", via="notice") == 0


async def test_a_bulk_cancel_stops_running_runs_on_both_workers(stack: dict) -> None:
    api, auth = stack["api"], stack["auth"]
    await put_hook(stack, max_attempts=3, backoff_seconds=0.1, timeout_seconds=120)
    n = 20
    # Each worker takes half: its slots are full with n / 2 (a message carries one run here).
    workers = [
        stack["spawn"]("worker", SCHEDULER_WORKER_CONCURRENCY=str(n // 2), **SLOW_BEAT) for _ in range(2)
    ]
    await asyncio.gather(*(w.wait_ready() for w in workers))
    body = {"runs": [{"job": "hook", "payload": {"hang": 120}}] * n}
    r = await api.post("/tenants/acme/runs/batch", json=body, headers=auth)
    assert r.status_code == 201, r.text
    ids = [run["id"] for run in r.json()["runs"]]
    calls = [await the_call(stack, run_id) for run_id in ids]
    for run_id in ids:
        await wait_for(api, run_id, auth, {"running"})

    sent = time.monotonic()
    body = {"action": "cancel", "filter": {"job": "hook"}}
    r = await api.post("/tenants/acme/runs/actions", json=body, headers=auth)
    assert r.status_code == 200, r.text
    assert r.json() == {"matched": n, "changed": n, "next_cursor": None}
    ended = [await closed(call) for call in calls]
    assert max(ended) - sent < STOP_WITHIN
    await asyncio.sleep(1.5)  # no retry, no outcome
    for run_id in ids:
        run = (await api.get(f"/runs/{run_id}", headers=auth)).json()
        assert run["status"] == "cancelled" and [e["outcome"] for e in run["attempts"]] == ["cancelled"]
        assert len(stack["receiver"].for_run(run_id)) == 1
    stopped = [
        counter(await w.metrics(), "scheduler_worker_attempts_stopped_total", via="notice") for w in workers
    ]
    assert stopped == [n // 2, n // 2]
    api_metrics = (await api.get("/metrics")).text
    assert counter(api_metrics, "scheduler_runs_cancelled_while_running_total", via="bulk") >= n
