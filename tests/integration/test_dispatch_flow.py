"""Engine and worker in this process against real Postgres and NATS: runs reach a terminal state."""

from __future__ import annotations

import asyncio

import asyncpg
import httpx
import nats

from app.config import Settings
from app.engine.engine import Engine
from app.worker.consumer import Worker
from tests.receiver import running_receiver
from tests.support import run_reaching


async def wait_for_status(
    api: httpx.AsyncClient, run_id: str, auth: dict, statuses: set[str], timeout: float = 20
) -> dict:
    return await run_reaching(api, run_id, auth, statuses, timeout)


async def test_noop_and_http_runs_succeed(
    api: httpx.AsyncClient, tenant: dict, settings: Settings, pool: asyncpg.Pool
) -> None:
    nc = await nats.connect(settings.nats_url)
    stop = asyncio.Event()
    engine = asyncio.create_task(Engine(settings, pool, nc).run(stop))
    worker = asyncio.create_task(Worker(settings, pool, nc).run(stop))
    try:
        async with running_receiver() as receiver:
            r = await api.put(
                "/tenants/acme/jobs/hook",
                json={"target": {"type": "http", "url": receiver.url}},
                headers=tenant["auth"],
            )
            assert r.status_code == 201, r.text
            noop = (
                await api.post("/tenants/acme/runs", json={"job": "hello"}, headers=tenant["auth"])
            ).json()
            hook = (
                await api.post(
                    "/tenants/acme/runs", json={"job": "hook", "payload": {"x": 1}}, headers=tenant["auth"]
                )
            ).json()
            done = await wait_for_status(api, noop["id"], tenant["auth"], {"succeeded", "failed"})
            assert done["status"] == "succeeded" and done["attempt"] == 1 and done["epoch"] == 1
            done = await wait_for_status(api, hook["id"], tenant["auth"], {"succeeded", "failed"})
            assert done["status"] == "succeeded", done
            [call] = receiver.for_run(hook["id"])
            assert call.payload == {"x": 1}
            assert call.headers["scheduler-attempt"] == "1" and call.headers["scheduler-epoch"] == "1"
            assert call.headers["traceparent"].startswith("00-")
    finally:
        stop.set()
        await asyncio.gather(engine, worker)
        await nc.close()
