"""Waiting for a condition that becomes true by itself (a worker finishes, a process gets ready)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def eventually(
    check: Callable[[], Awaitable[T] | T], *, timeout: float = 10.0, interval: float = 0.1, what: str = ""
) -> T:
    """Calls `check` every `interval` until it returns something truthy, and returns that; raises
    TimeoutError (naming `what` and the last value) if it has not within `timeout` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = check()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value  # type: ignore[return-value]
        if loop.time() >= deadline:
            raise TimeoutError(
                f"not within {timeout}s: {what or getattr(check, '__name__', 'check')} (last: {value!r})"
            )
        await asyncio.sleep(interval)
