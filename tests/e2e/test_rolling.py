"""Deploys while runs flow: a rolling restart of every process (SIGTERM one at a time, each replaced
before the next goes, as a Deployment's rolling update does) and a rolling upgrade from the release
before (its code from git, at PREVIOUS_RELEASE) to this one — old and new processes side by side,
this release's migrations run between the two. Two APIs, two engines, two workers; clients submit
throughout, each run once with an Idempotency-Key, retried on the other API after a transport error
or a 503, as a careful client would.

Checked: every submission was accepted and its run succeeded (none lost); no (run, epoch) reached
the receiver twice; no answer was a 5xx other than 503 (but the previous release's 500s for a
prepared statement the migration made stale, which this release answers 503); every process stopped by SIGTERM exited on
its own, and each worker was stopped while running runs (the deploy landed on work, not on an idle
stack)."""

from __future__ import annotations

import asyncio
import functools
import io
import random
import signal
import subprocess
import tarfile
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import httpx
import pytest
import pytest_asyncio

from app.config import Settings
from app.dev import free_port
from stack import databases
from stack.eventually import eventually
from stack.processes import SchedulerProcess
from stack.settings import process_env, scheduler_command
from tests.faults.victim import JOB, TENANT, Victim
from tests.processes import ROOT
from tests.receiver import Receiver, running_receiver
from tests.support import ADMIN_TOKEN, Services, bearer, delete_stream, drop_database, make_settings

# The release this one upgrades from: the last commit that landed.
PREVIOUS_RELEASE = "822f64d"
# What the previous release logs when a migration changes a table's row type under one of its
# prepared statements inside a transaction: it answered 500 (this release answers 503, app.db.errors).
STALE_PLAN = "asyncpg.exceptions.InvalidCachedStatementError"
ROLES = ("worker", "engine", "api", "worker", "engine", "api")  # the order processes are replaced in
SENDERS = 4
MAX_SLEEP = 0.3  # each run's webhook answers within this long


def previous_release(into: Path) -> Path:
    """The previous release's tree (what its image would hold), from this checkout's history."""
    try:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", "--format=tar", PREVIOUS_RELEASE],
            check=True,
            capture_output=True,
        ).stdout
    except subprocess.CalledProcessError as exc:  # a shallow clone: this test needs the history
        raise RuntimeError(f"git archive {PREVIOUS_RELEASE}: {exc.stderr.decode()}") from None
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def spawn(role: str, settings: Settings, logs: Path, code: Path | None, name: str) -> SchedulerProcess:
    """A `scheduler ROLE` process of this release (code None) or of the tree at `code`."""
    env = {"SCHEDULER_ENGINE": "off"} if role == "api" else {}
    env["SCHEDULER_OWNER"] = f"{settings.owner}-{name}"  # its leases name it
    if code is not None:
        env["PYTHONPATH"] = str(code)  # ahead of this checkout's editable install
    p = SchedulerProcess(
        role, settings, logs, port=free_port(), name=name, env=env, cwd=code or ROOT, stop_timeout=30
    )
    p.start()
    return p


def migrate(settings: Settings, code: Path | None) -> None:
    env = process_env(settings)
    if code is not None:
        env["PYTHONPATH"] = str(code)
    subprocess.run([*scheduler_command(), "migrate"], cwd=code or ROOT, env=env, check=True, timeout=120)


@pytest_asyncio.fixture(loop_scope="session")
async def empty_settings(services: Services) -> AsyncIterator[Settings]:
    """Settings over an empty database (each release migrates it itself), with short leases."""
    name = await databases.create_database(services.postgres_url, f"r_{random.getrandbits(48):012x}")
    s = make_settings(
        services,
        name,
        lease_seconds=2.0,
        dispatch_lease_seconds=10.0,
        reap_interval_seconds=0.3,
        worker_grace_seconds=5.0,
    )
    yield s
    await delete_stream(s)
    await drop_database(services, name)


async def in_flight(pool: asyncpg.Pool, owner: str | None = None) -> int:
    """Runs dispatched or running; with `owner`, the runs that process is running."""
    if owner is None:
        return int(
            await pool.fetchval("SELECT count(*) FROM job_runs WHERE status IN ('dispatched', 'running')")
        )
    return int(
        await pool.fetchval(
            "SELECT count(*) FROM job_runs WHERE status = 'running' AND lease_owner = $1", owner
        )
    )


async def deploy_under_load(settings: Settings, logs: Path, before: Path | None) -> None:
    """Start every process from `before` (None: this release), submit runs throughout, migrate to
    this release, replace the processes one at a time with this release's, then check the run."""
    assert settings.database_url
    migrate(settings, before)
    live = [spawn(role, settings, logs, before, f"old-{role}-{i}") for i, role in enumerate(ROLES)]
    await asyncio.gather(*(p.wait_ready() for p in live))
    pool = await asyncpg.create_pool(settings.database_url, min_size=1, max_size=2)
    stop = asyncio.Event()
    async with running_receiver() as receiver, httpx.AsyncClient(timeout=30) as admin:
        api = next(p for p in live if p.role == "api")
        r = await admin.post(f"{api.base_url}/tenants", json={"id": TENANT}, headers=bearer(ADMIN_TOKEN))
        assert r.status_code == 201, r.text
        victim = Victim(bearer(r.json()["api_key"]), random.Random(7), MAX_SLEEP)
        job = victim.job(receiver.url, max_attempts=10)
        r = await admin.put(f"{api.base_url}/tenants/{TENANT}/jobs/{JOB}", json=job, headers=victim.auth)
        assert r.status_code == 201, r.text

        def api_ports() -> list[int]:  # what a load balancer would route to: APIs up and not leaving
            return [p.port for p in live if p.role == "api" and p.alive()]

        senders = asyncio.create_task(victim.senders(api_ports, stop, SENDERS))
        stopped: list[tuple[str, int | None, bool, int]] = []  # name, exit code, killed, runs in flight
        try:
            await eventually(lambda: in_flight(pool), until=bool, timeout=30, interval=0.05)
            if before is not None:
                await asyncio.to_thread(migrate, settings, None)  # the new schema under the old code
            for i, old in enumerate(list(live)):
                new = spawn(old.role, settings, logs, None, f"new-{old.role}-{i}")
                await new.wait_ready()
                live.append(new)
                if old.role == "worker":  # strike while it runs work, not between runs
                    flying = await eventually(
                        functools.partial(in_flight, pool, old.env["SCHEDULER_OWNER"]),
                        until=bool,
                        timeout=30,
                        interval=0.02,
                    )
                else:
                    flying = await in_flight(pool)
                live.remove(old)
                code = await asyncio.to_thread(old.stop)
                if (
                    old.role == "api"
                    and code == -signal.SIGTERM
                    and "Finished server process" in old.output()
                ):
                    code = 0  # uvicorn re-raises the signal once its graceful shutdown is done
                stopped.append((old.name, code, old.killed, flying))
            await asyncio.sleep(2)
        finally:
            stop.set()
            await senders
        try:
            await finish(pool, victim, receiver, stopped, logs)
        finally:
            await pool.close()
            for p in live:
                await asyncio.to_thread(p.stop)


async def finish(
    pool: asyncpg.Pool,
    victim: Victim,
    receiver: Receiver,
    stopped: list[tuple[str, int | None, bool, int]],
    logs: Path,
) -> None:
    accepted = sorted(set(victim.accepted))
    assert victim.problems == [], (victim.problems[:5], dict(victim.answers), dict(victim.cut), stopped)
    assert len(accepted) > 100, f"only {len(accepted)} runs submitted: the deploy ran on no load"

    async def statuses() -> Counter[str]:
        rows = await pool.fetch("SELECT status FROM job_runs WHERE id = ANY($1::uuid[])", accepted)
        return Counter(r["status"] for r in rows)

    done = await eventually(
        statuses, until=lambda c: c.get("succeeded", 0) == len(accepted), timeout=90, interval=0.5
    )
    print(
        f"{len(accepted)} runs submitted, answers {dict(victim.answers)}, "
        f"stopped (name, exit, killed, runs in flight): {stopped}"
    )
    assert done == {"succeeded": len(accepted)}, done  # none lost, none failed
    calls = Counter(
        (c.headers.get("scheduler-run-id"), c.headers.get("scheduler-epoch"))
        for c in receiver.calls
        if not c.is_callback
    )
    assert {pair for pair, n in calls.items() if n > 1} == set(), "a (run, epoch) started twice"
    # 500s only from the previous release, each a stale prepared statement it logged, never from this
    # one (which answers 503 for it: app.db.errors.is_transient).
    stale_plans = sum(p.read_text(errors="replace").count(STALE_PLAN) for p in logs.glob("old-api-*.log"))
    assert not any(STALE_PLAN in p.read_text(errors="replace") for p in logs.glob("new-api-*.log"))
    assert {c for c in victim.answers if c >= 500 and c not in (500, 503)} == set(), victim.answers
    assert victim.answers[500] <= stale_plans, (victim.answers, stale_plans)
    assert [s for s in stopped if s[1] != 0 or s[2]] == [], f"not a clean exit on SIGTERM: {stopped}"
    assert all(s[3] > 0 for s in stopped if "worker" in s[0]), f"a worker stopped running nothing: {stopped}"


@pytest.mark.timeout(300)
async def test_a_rolling_restart_of_every_process_loses_nothing(
    empty_settings: Settings, tmp_path: Path
) -> None:
    await deploy_under_load(empty_settings, tmp_path, before=None)


@pytest.mark.timeout(300)
async def test_a_rolling_upgrade_from_the_previous_release_loses_nothing(
    empty_settings: Settings, tmp_path: Path
) -> None:
    old = previous_release(tmp_path / "previous")
    assert (old / "alembic" / "versions").is_dir()
    await deploy_under_load(empty_settings, tmp_path, before=old)
