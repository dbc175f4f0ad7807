"""Retry and bulk cancel racing real engines and workers (API + engine in this process, workers as
subprocesses, Postgres and NATS JetStream): the epoch fence decides every race."""

from __future__ import annotations

import asyncio
import re
import signal

from stack.eventually import eventually
from tests.e2e.conftest import wait_for
from tests.e2e.test_worker import put_hook, submit


def stale_finishes(metrics_text: str) -> float:
    m = re.search(r'^scheduler_stale_results_total\{stage="finish"\} (\S+)$', metrics_text, re.M)
    return float(m.group(1)) if m else 0.0


async def test_a_retry_discards_the_outcome_a_slow_worker_brings_back_under_the_old_epoch(
    stack: dict,
) -> None:
    api, auth, receiver = stack["api"], stack["auth"], stack["receiver"]
    # Attempt 1 takes 3 s and would succeed; attempt 2 fails. One attempt allowed until the retry.
    await put_hook(stack, max_attempts=1, timeout_seconds=30)
    worker = stack["spawn"]("worker")
    await worker.wait_ready()
    run = await submit(stack, payload={"sleep": 3, "statuses": [200, 500]})
    await eventually(lambda: receiver.for_run(run["id"]), until=bool, timeout=30, what="attempt 1 begins")

    worker.signal(signal.SIGSTOP)  # the slow worker: alive, silent, still holding its call
    try:
        lost = await wait_for(api, run["id"], auth, {"failed"}, timeout=30)  # its lease lapsed: reaped
        assert lost["attempt"] == 1 and lost["epoch"] == 1 and "lease expired" in lost["last_error"]
        r = await api.post(f"/runs/{run['id']}/retry", headers=auth)
        assert r.status_code == 200, r.text
        assert r.json()["epoch"] == 2 and r.json()["max_attempts"] == 2
        # The engine claims it again under a new epoch while the old attempt's answer waits.
        await wait_for(api, run["id"], auth, {"dispatched"}, timeout=30)
    finally:
        worker.signal(signal.SIGCONT)

    # The old worker brings back attempt 1's success under epoch 1: discarded. The retry's own
    # attempt (epoch 3) is what the run shows.
    done = await wait_for(api, run["id"], auth, {"succeeded", "failed"}, timeout=60)
    assert done["status"] == "failed" and done["attempt"] == 2 and done["epoch"] == 3, done
    assert "500" in done["last_error"]
    calls = receiver.for_run(run["id"])
    assert [(c.headers["scheduler-attempt"], c.headers["scheduler-epoch"]) for c in calls] == [
        ("1", "1"),
        ("2", "3"),
    ]
    assert stale_finishes(await worker.metrics()) >= 1  # the old outcome reached the fence, and was dropped
    await asyncio.sleep(1)
    assert (await api.get(f"/runs/{run['id']}", headers=auth)).json()["status"] == "failed"


async def test_bulk_cancel_while_the_engine_claims_the_same_runs(stack: dict) -> None:
    api, auth, receiver = stack["api"], stack["auth"], stack["receiver"]
    await put_hook(stack, timeout_seconds=30)
    total = 600
    r = await api.post(
        "/tenants/acme/runs/batch",
        json={"runs": [{"job": "hook", "payload": {"sleep": 0.3}}] * total},
        headers=auth,
    )
    assert r.status_code == 201, r.text
    ids = {run["id"] for run in r.json()["runs"]}
    worker = stack["spawn"]("worker", SCHEDULER_WORKER_CONCURRENCY="8")
    await worker.wait_ready()
    await eventually(lambda: len(receiver.calls) >= 8, until=bool, timeout=30, what="work in flight")

    # Cancel everything of the job while the engine claims it and the worker runs it, in pages.
    cancelled, cursor = 0, None
    while True:
        body = {"action": "cancel", "filter": {"job": "hook"}, "limit": 250, "cursor": cursor}
        r = await api.post("/tenants/acme/runs/actions", json=body, headers=auth)
        assert r.status_code == 200, r.text
        cancelled += r.json()["changed"]
        cursor = r.json()["next_cursor"]
        if cursor is None:
            break

    rows = await eventually(
        lambda: stack_rows(api, auth),
        until=lambda rows: (
            all(r["status"] in ("succeeded", "cancelled") for r in rows) and len(rows) == total
        ),
        timeout=60,
        what="every run terminal",
    )
    by_status = {s: [r for r in rows if r["status"] == s] for s in ("succeeded", "cancelled")}
    assert {r["id"] for r in rows} == ids and len(by_status["succeeded"]) + len(
        by_status["cancelled"]
    ) == total
    assert len(by_status["cancelled"]) == cancelled  # each cancel counted once
    # Work was in flight: runs the engine had claimed (dispatched, their message in the stream) were
    # cancelled and never ran; runs the worker was running were cancelled too, their attempt closed
    # as `cancelled` and not called again.
    never_started = [r for r in by_status["cancelled"] if r["attempt"] == 0]
    stopped = [r for r in by_status["cancelled"] if r["attempt"] > 0]
    assert any(r["dispatched_at"] is not None for r in never_started), "no claimed run was cancelled"
    assert stopped, "no running run was cancelled: the race was not exercised"
    for r in never_started:
        assert r["started_at"] is None and receiver.for_run(r["id"]) == [], r
    for r in stopped:
        assert r["attempt"] == 1 and [e["outcome"] for e in r["attempts"]] == ["cancelled"], r
        assert len(receiver.for_run(r["id"])) <= 1, r  # its call may have been stopped on its way
    for r in by_status["succeeded"]:
        assert r["attempt"] == 1 and len(receiver.for_run(r["id"])) == 1, r


async def stack_rows(api, auth: dict) -> list[dict]:
    rows: list[dict] = []
    cursor = None
    while True:
        params = {"limit": 500, **({"cursor": cursor} if cursor else {})}
        page = (await api.get("/tenants/acme/runs", params=params, headers=auth)).json()
        rows += page["runs"]
        cursor = page["next_cursor"]
        if cursor is None:
            return rows
