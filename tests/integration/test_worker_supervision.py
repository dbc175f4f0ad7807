"""The worker's parts are background services (app/background.py). One whose step fails goes on
(logged, counted in scheduler_unexpected_errors_total{service}); one that dies stops the worker at
once (without the process's stop event), what it fetched is handed back, and the error surfaces."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import httpx
import nats
import pytest

from app.bus.jetstream import ensure_stream
from app.config import Settings
from app.engine.engine import Engine
from app.telemetry import metrics
from app.worker.consumer import Worker
from tests.receiver import running_receiver
from tests.support import run_reaching


def service(worker: Worker, name: str) -> Any:
    [found] = [s for stage in worker.stages for s in stage if s.name == name]
    return found


@pytest.mark.parametrize("part", ["completer", "heartbeat", "in progress", "callbacks", "intake"])
async def test_a_worker_whose_part_dies_stops_and_says_why(
    settings: Settings, pool: asyncpg.Pool, part: str
) -> None:
    nc = await nats.connect(settings.nats_url)
    try:
        await ensure_stream(nc.jetstream(), settings)
        worker = Worker(settings.model_copy(update={"worker_grace_seconds": 0.5}), pool, nc)

        async def broken(stop: asyncio.Event) -> None:
            await asyncio.sleep(0.2)
            raise OSError(f"{part} broke")

        service(worker, part).run = broken
        stop = asyncio.Event()
        with pytest.raises(Exception) as raised:
            await asyncio.wait_for(worker.run(stop), 15)
        assert not isinstance(raised.value, TimeoutError), "the worker went on without its part"
        assert f"{part} broke" in f"{raised.value!r} {raised.value.__cause__!r}"
        assert not stop.is_set()
    finally:
        await nc.close()


def failing_once(
    real: Callable[..., Awaitable[Any]], failed: list[str], name: str
) -> Callable[..., Awaitable[Any]]:
    async def once(*args: Any, **kwargs: Any) -> Any:
        if name not in failed:
            failed.append(name)
            raise RuntimeError(f"a bug in the {name}")
        return await real(*args, **kwargs)

    return once


def unexpected(name: str) -> float:
    value: float = metrics.unexpected_errors_total.labels(name)._value.get()
    return value


async def test_the_completer_and_the_callbacks_survive_an_unexpected_error(
    api: httpx.AsyncClient, tenant: dict[str, Any], settings: Settings, pool: asyncpg.Pool
) -> None:
    nc = await nats.connect(settings.nats_url)
    stop = asyncio.Event()
    worker = Worker(settings, pool, nc)
    failed: list[str] = []
    worker.completer.flush = failing_once(worker.completer.flush, failed, "completer")  # type: ignore[method-assign]
    callbacks = service(worker, "callbacks")
    callbacks.run_once = failing_once(callbacks.run_once, failed, "callbacks")
    before = {name: unexpected(name) for name in ("completer", "callbacks")}
    engine = asyncio.create_task(Engine(settings, pool, nc).run(stop))
    running = asyncio.create_task(worker.run(stop))
    try:
        async with running_receiver() as receiver:
            r = await api.put(
                "/tenants/acme/jobs/hook",
                json={"target": {"type": "http", "url": receiver.url}},
                headers=tenant["auth"],
            )
            assert r.status_code == 201, r.text
            body = {"job": "hook", "callback": {"url": receiver.url}}
            run = (await api.post("/tenants/acme/runs", json=body, headers=tenant["auth"])).json()
            done = await run_reaching(api, run["id"], tenant["auth"], {"succeeded", "failed"}, 20)
            assert done["status"] == "succeeded", done  # recorded by the completer's next step
            for _ in range(100):  # the callback, by the deliverer's next step
                if receiver.callbacks_for(run["id"]):
                    break
                await asyncio.sleep(0.1)
            assert len(receiver.for_run(run["id"])) == 1 and len(receiver.callbacks_for(run["id"])) == 1
        assert sorted(failed) == ["callbacks", "completer"]
        assert not running.done(), f"the worker died: {running.exception()!r}"
        assert {name: unexpected(name) - before[name] for name in before} == {"completer": 1, "callbacks": 1}
    finally:
        stop.set()
        await asyncio.gather(engine, running)
        await nc.close()
