"""A hostile tenant beside a well-behaved one, against a real worker subprocess (issue 12, items 2-4):
a poison answer, a flush that cannot complete at SIGTERM, huge answers, and hanging endpoints."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from urllib.parse import urlsplit

import asyncpg
import pytest

from app.config import Settings
from stack.eventually import eventually
from tests.e2e.conftest import wait_for
from tests.support import create_tenant, with_database


async def hook(stack: dict, auth: dict, tenant: str, name: str = "hook", **fields) -> None:
    body = {"target": {"type": "http", "url": stack["receiver"].url}, **fields}
    r = await stack["api"].put(f"/tenants/{tenant}/jobs/{name}", json=body, headers=auth)
    assert r.status_code in (200, 201), r.text


async def submit(stack: dict, auth: dict, tenant: str, payload: dict, job: str = "hook") -> str:
    r = await stack["api"].post(
        f"/tenants/{tenant}/runs", json={"job": job, "payload": payload}, headers=auth
    )
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


async def victim(stack: dict) -> dict:
    created = await create_tenant(stack["api"], "victim")
    auth = {"Authorization": f"Bearer {created['api_key']}"}
    await hook(stack, auth, "victim", max_attempts=1)
    return auth


async def until_called(stack: dict, run_id: str, timeout: float = 20) -> None:
    await eventually(lambda: stack["receiver"].for_run(run_id), timeout=timeout, what="the target was called")


def memory_kib(pid: int) -> dict[str, int]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0])
    return fields


async def test_a_poison_answer_is_stored_sanitised_and_does_not_hold_others(stack: dict) -> None:
    """A 500 whose body holds a NUL and invalid UTF-8: stored readable, and the other tenant's
    outcomes, recorded after it, are not held behind it."""
    await hook(stack, stack["auth"], "acme", max_attempts=1)
    good = await victim(stack)
    worker = stack["spawn"]("worker")
    await worker.wait_ready()
    poisoned = await submit(stack, stack["auth"], "acme", {"poison": 500})
    await until_called(stack, poisoned)
    others = [await submit(stack, good, "victim", {"n": i}) for i in range(5)]
    failed = await wait_for(stack["api"], poisoned, stack["auth"], {"failed", "succeeded"}, timeout=20)
    assert failed["status"] == "failed"
    assert failed["last_error"].startswith("HTTP 500: bad\ufffdbody"), failed["last_error"]
    assert "\x00" not in failed["last_error"]
    for run_id in others:
        assert (await wait_for(stack["api"], run_id, good, {"failed", "succeeded"}))["status"] == "succeeded"
    started = time.monotonic()
    assert worker.stop(timeout=20) == 0
    assert time.monotonic() - started < 5 + 3  # the stack's grace period, and a margin


async def test_sigterm_is_honoured_while_outcomes_cannot_be_recorded(
    stack: dict, e2e_settings: Settings
) -> None:
    """The database goes away under the worker (its connections are ended, new ones refused) while
    an outcome waits to be recorded: the flush keeps failing, and SIGTERM still ends the worker
    within its grace period and a margin. The run is left to the reaper, not lost."""
    await hook(stack, stack["auth"], "acme", max_attempts=3, timeout_seconds=10)
    worker = stack["spawn"]("worker", SCHEDULER_WORKER_GRACE_SECONDS="2")
    await worker.wait_ready()
    run_id = await submit(stack, stack["auth"], "acme", {"sleep": 1})
    await wait_for(stack["api"], run_id, stack["auth"], {"running"})
    # The URL's path, not its last "/": an embedded server's URL ends in ?host=<socket dir>.
    database = urlsplit(e2e_settings.database_url).path.lstrip("/")
    admin = await asyncpg.connect(with_database(e2e_settings.database_url, "postgres"))
    try:
        await admin.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS false')
        await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = $1 AND application_name = 'scheduler-worker'",
            database,
        )
        # The fault landed: the flush is failing.
        await eventually(worker.output, until=lambda out: "outcomes failed" in out, timeout=15, interval=0.2)
        started = time.monotonic()
        worker.stop(timeout=30)
        elapsed = time.monotonic() - started
    finally:
        await admin.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS true')
        await admin.close()
    assert elapsed < 2 + FINAL_FLUSH_MARGIN, f"the worker took {elapsed:.1f}s to stop"
    rescuer = stack["spawn"]("worker")
    await rescuer.wait_ready()
    done = await wait_for(stack["api"], run_id, stack["auth"], {"succeeded", "failed"}, timeout=40)
    assert done["status"] == "succeeded"


FINAL_FLUSH_MARGIN = 5.0  # the final flush's own 2 s (completer.FINAL_FLUSH_SECONDS) and process exit


async def test_huge_answers_keep_the_worker_memory_flat(stack: dict) -> None:
    await hook(stack, stack["auth"], "acme", max_attempts=1, timeout_seconds=60)
    worker = stack["spawn"]("worker")
    await worker.wait_ready()
    warm = await submit(stack, stack["auth"], "acme", {})
    await wait_for(stack["api"], warm, stack["auth"], {"succeeded"})
    before = memory_kib(worker.proc.pid)
    answers = [{"stream_mib": 200, "status": status} for status in (200, 500, 200, 500)]
    runs = [await submit(stack, stack["auth"], "acme", a) for a in answers]
    done = [await wait_for(stack["api"], r, stack["auth"], {"succeeded", "failed"}, timeout=60) for r in runs]
    after = memory_kib(worker.proc.pid)
    grown_mib = (after["VmHWM"] - before["VmHWM"]) / 1024
    print(f"worker memory: {before} -> {after} KiB; peak grew {grown_mib:.1f} MiB")
    assert [d["status"] for d in done] == ["succeeded", "failed", "succeeded", "failed"], done
    assert done[1]["last_error"] == "HTTP 500: " + "x" * 300
    assert grown_mib < 32, f"the worker's peak memory grew {grown_mib:.0f} MiB over 4 x 200 MiB answers"


@pytest.mark.parametrize("victim_target", ["http", "noop"])
async def test_hanging_endpoints_of_one_tenant_do_not_starve_another(stack: dict, victim_target: str) -> None:
    """Eight slots. The hostile tenant, alone at first, takes all of them (work-conserving) with
    webhooks that hang for a minute and has more waiting; the victim's runs still finish promptly."""
    await hook(stack, stack["auth"], "acme", max_attempts=1, timeout_seconds=90)
    good = await victim(stack)
    if victim_target == "noop":
        r = await stack["api"].put(
            "/tenants/victim/jobs/hook", json={"target": {"type": "noop"}}, headers=good
        )
        assert r.status_code == 200, r.text
    worker = stack["spawn"]("worker", SCHEDULER_WORKER_CONCURRENCY="8")
    await worker.wait_ready()
    for _ in range(24):
        await submit(stack, stack["auth"], "acme", {"sleep": 60})
    # A tenant alone uses every slot.
    await eventually(lambda: len(stack["receiver"].calls), until=lambda n: n >= 8, timeout=20, what="8 calls")
    await asyncio.sleep(1.5)
    assert len(stack["receiver"].calls) == 8  # and no more: the rest waits
    started = time.monotonic()
    runs = [await submit(stack, good, "victim", {"n": i}) for i in range(5)]
    for run_id in runs:
        done = await wait_for(stack["api"], run_id, good, {"succeeded", "failed"}, timeout=15)
        assert done["status"] == "succeeded"
    print(f"the victim's {len(runs)} runs finished in {time.monotonic() - started:.2f}s")
    hostile = (await stack["api"].get("/tenants/acme/runs?limit=100", headers=stack["auth"])).json()["runs"]
    # Held back, not re-dispatched: still the first claim's epoch, not yet started.
    assert {r["status"] for r in hostile} <= {"running", "dispatched"}
    assert all(r["epoch"] == 1 for r in hostile)
