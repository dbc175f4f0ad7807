"""The worker's parts are supervised like the engine's: one that dies stops the worker at once
(without the process's stop event), what it fetched is handed back, and the error surfaces."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import nats
import pytest

from app.bus.jetstream import ensure_stream
from app.config import Settings
from app.worker.consumer import Worker


@pytest.mark.parametrize("part", ["heartbeat", "keep_messages", "run"])
async def test_a_worker_whose_completer_or_heartbeat_dies_stops_and_says_why(
    settings: Settings, pool: asyncpg.Pool, part: str
) -> None:
    nc = await nats.connect(settings.nats_url)
    try:
        await ensure_stream(nc.jetstream(), settings)
        worker = Worker(settings.model_copy(update={"worker_grace_seconds": 0.5}), pool, nc)

        async def broken(*_: Any, **__: Any) -> None:
            await asyncio.sleep(0.2)
            raise OSError(f"{part} broke")

        setattr(worker.completer, part, broken)
        stop = asyncio.Event()
        with pytest.raises(Exception) as raised:
            await asyncio.wait_for(worker.run(stop), 15)
        assert not isinstance(raised.value, TimeoutError), "the worker went on without its part"
        assert f"{part} broke" in f"{raised.value!r} {raised.value.__cause__!r}"
        assert not stop.is_set()
    finally:
        await nc.close()
