"""The deadline a worker holds a run's execution to (app/aio.py: Deadline): asyncio.timeout's
behaviour, checked beside asyncio.timeout itself — a block that overruns raises TimeoutError and
leaves its task uncancelled, one that ends in time is left alone afterwards, and a cancellation
from outside goes through as a cancellation, even when it comes at the moment the time is up."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from app.aio import Deadline


@contextlib.asynccontextmanager
async def deadline(seconds: float) -> AsyncIterator[None]:
    with Deadline(seconds):
        yield


# Each test runs against both: the new one must behave as the one it replaces.
KINDS: list[Callable[[float], Any]] = [deadline, asyncio.timeout]


@pytest.mark.parametrize("limit", KINDS)
async def test_an_overrun_raises_timeout_error_and_leaves_the_task_uncancelled(limit: Any) -> None:
    async def run() -> str:
        try:
            async with limit(0.05):
                await asyncio.sleep(5)
        except TimeoutError:
            assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]
            await asyncio.sleep(0)  # still runs: no cancellation is pending
            return "timed out"
        return "finished"

    assert await asyncio.wait_for(run(), 2) == "timed out"


@pytest.mark.parametrize("limit", KINDS)
async def test_a_block_in_time_returns_and_is_not_cancelled_later(limit: Any) -> None:
    async def run() -> str:
        async with limit(0.05):
            await asyncio.sleep(0)
        await asyncio.sleep(0.15)  # past the deadline: its timer is gone
        return "finished"

    assert await run() == "finished"


@pytest.mark.parametrize("limit", KINDS)
async def test_a_cancellation_from_outside_goes_through(limit: Any) -> None:
    entered = asyncio.Event()

    async def run() -> None:
        async with limit(5):
            entered.set()
            await asyncio.sleep(5)

    task = asyncio.create_task(run())
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()


@pytest.mark.parametrize("limit", KINDS)
async def test_a_cancellation_at_the_moment_the_time_is_up_is_a_cancellation(limit: Any) -> None:
    """The deadline's timer and a cancellation from outside both fire before the block next runs:
    both requests stand when it sees the cancellation, and the outside one wins."""
    loop = asyncio.get_running_loop()

    async def run() -> None:
        async with limit(0.05):
            end = loop.time() + 0.15
            while loop.time() < end:  # busy, never yielding: both timers fall due meanwhile
                pass
            await asyncio.sleep(5)

    task = asyncio.create_task(run())
    loop.call_later(0.09, task.cancel)
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()
