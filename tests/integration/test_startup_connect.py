"""A NATS connection made by app.runtime (which gives up at start so it can be retried with
backoff and stopped) still re-connects forever once made: a NATS restart stalls, it does not end."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from app.bus.jetstream import close, connect
from app.dev import EmbeddedNats, free_port
from app.runtime import until_connected
from stack.eventually import eventually


async def test_a_connection_that_gave_up_at_start_reconnects_forever_once_made(tmp_path: Path) -> None:
    server = EmbeddedNats(tmp_path / "nats", port=free_port())
    await asyncio.to_thread(server.start)
    nc = await connect(server.url(), "t", retry_at_start=False)
    try:
        await asyncio.to_thread(server.stop)
        await asyncio.sleep(3)  # many more failed reconnects than the one allowed at start
        assert not nc.is_closed
        await asyncio.to_thread(server.start)
        await eventually(lambda: nc.is_connected, timeout=15, what="reconnected")
        await nc.flush(timeout=2)
    finally:
        await close(nc)
        server.stop()


async def test_the_wait_for_an_unreachable_server_retries_and_ends_on_stop(tmp_path: Path) -> None:
    attempts = 0
    url = f"nats://127.0.0.1:{free_port()}"

    async def attempt() -> object:
        nonlocal attempts
        attempts += 1
        return await connect(url, "t", retry_at_start=False)

    stop = asyncio.Event()
    waiting = asyncio.create_task(until_connected(attempt, "nats", stop))
    await asyncio.sleep(3)
    assert not waiting.done() and attempts >= 2  # retried, with a delay between attempts
    stop.set()
    started = time.monotonic()
    assert await waiting is None
    assert time.monotonic() - started < 1.0
