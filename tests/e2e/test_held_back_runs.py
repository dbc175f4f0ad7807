"""Runs a worker holds back (their tenant is over its share) keep their dispatch lease: however long
they wait, they are not reaped and claimed again under a new epoch (issue 12, item 4)."""

from __future__ import annotations

import asyncio

import pytest_asyncio

from app.config import Settings
from stack.eventually import eventually
from tests.e2e.conftest import wait_for
from tests.e2e.test_hostile_tenant import hook, submit, victim


@pytest_asyncio.fixture(loop_scope="session")
async def e2e_settings(settings: Settings) -> Settings:
    # A dispatch lease much shorter than the wait, and a reaper that looks often.
    return settings.model_copy(
        update={
            "dispatch_lease_seconds": 2.0,
            "lease_seconds": 2.0,
            "ack_wait_seconds": 3.0,
            "reap_interval_seconds": 0.3,
            "worker_grace_seconds": 2,
        }
    )


async def test_held_back_runs_keep_their_dispatch_lease(stack: dict) -> None:
    await hook(stack, stack["auth"], "acme", max_attempts=1, timeout_seconds=60)
    good = await victim(stack)
    # Four slots, and room to hold only four more: the rest of the hostile backlog is nak'ed back
    # to the stream again and again while the victim's runs go through.
    worker = stack["spawn"]("worker", SCHEDULER_WORKER_CONCURRENCY="4", SCHEDULER_WORKER_FETCH_BATCH="4")
    await worker.wait_ready()
    hostile = [await submit(stack, stack["auth"], "acme", {"sleep": 30}) for _ in range(20)]
    await eventually(lambda: len(stack["receiver"].calls) >= 4, timeout=20, what="4 hostile runs executing")
    await asyncio.sleep(3 * 2.0)  # three dispatch leases
    runs = [await submit(stack, good, "victim", {"n": i}) for i in range(3)]
    for run_id in runs:
        assert (await wait_for(stack["api"], run_id, good, {"succeeded", "failed"}, timeout=15))[
            "status"
        ] == ("succeeded")
    states = [(await stack["api"].get(f"/runs/{r}", headers=stack["auth"])).json() for r in hostile]
    assert sum(s["status"] == "running" for s in states) == 4
    assert {s["status"] for s in states} == {"running", "dispatched"}
    assert {s["epoch"] for s in states} == {1}, "a held-back run was reaped and claimed again"
    assert len(stack["receiver"].calls) == 4 + 3
