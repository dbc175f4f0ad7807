"""Periodic side-tasks: run a step every interval until stopped, surviving errors (a restarting
Postgres is an outage to wait out, not a reason for the process to die)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger(__name__)


async def sleep_or_stop(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=seconds)


async def every(stop: asyncio.Event, interval: float, step: Callable[[], Awaitable[Any]], name: str) -> None:
    while not stop.is_set():
        try:
            await step()
        except Exception as exc:
            log.warning("%s: %s: %s; retrying", name, type(exc).__name__, exc)
        # Jitter keeps replicas from running their side-tasks in lockstep.
        await sleep_or_stop(stop, interval * random.uniform(0.8, 1.2))
