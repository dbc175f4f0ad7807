"""Waiting for a condition that becomes true by itself (a worker finishes, a process gets ready)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


async def eventually(
    check: Callable[[], Awaitable[T] | T],
    *,
    until: Callable[[T], Any] = bool,
    timeout: float = 10.0,
    interval: float = 0.05,
    what: str = "",
) -> T:
    """Calls `check` every `interval` until `until(value)` holds (by default: the value is truthy)
    and returns that value. Past `timeout` seconds, raises TimeoutError naming `what` and the last
    value, so a failure says where things stood."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = check()
        if inspect.isawaitable(value):
            value = await value
        if until(value):  # type: ignore[arg-type]
            return value  # type: ignore[return-value]
        if loop.time() >= deadline:
            raise TimeoutError(f"not within {timeout:g}s: {what or 'the condition'}; last: {value!r:.2000}")
        await asyncio.sleep(interval)
