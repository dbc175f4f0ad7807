"""A worker stalled between a run's start and its call (a stopped process, a long pause) must not
call the target once the run's lease may have lapsed: the reaper may have given the run, and its
concurrency slot, to another worker under a newer epoch (issue 17). Real HTTP receiver, real
Postgres (the tenant's signing keys)."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime

import asyncpg
import httpx
from nats.aio.msg import Msg

from app.bus.message import RunMessage
from app.config import Settings
from app.worker.delivery import Delivery, Part
from app.worker.executor import Executor
from tests.receiver import running_receiver


def delivery(url: str, lease_until: float) -> Delivery:
    run = RunMessage(
        uuid.uuid4(), datetime.now(UTC), "acme", "hook", 1, 1, {}, {"type": "http", "url": url}, 5.0
    )
    return Delivery(
        Part.alone(Msg(None, subject="runs.acme", headers={})), run, attempt=1, lease_until=lease_until
    )  # type: ignore[arg-type]


async def test_a_stalled_worker_does_not_call_the_target_after_its_lease(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    executor = Executor(settings, pool, {}, max_in_flight=4)
    try:
        async with running_receiver() as receiver:
            stalled = delivery(receiver.url, lease_until=time.monotonic() - 0.1)
            await executor.execute(stalled)
            assert not stalled.ok and "lease lapsed" in (stalled.error or "")
            assert receiver.calls == []

            leased = delivery(receiver.url, lease_until=time.monotonic() + 30)
            await executor.execute(leased)
            assert leased.ok, leased.error
            assert len(receiver.for_run(str(leased.run.run_id))) == 1
    finally:
        await executor.close()
