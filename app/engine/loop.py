"""Periodic side-tasks: run a step every interval until stopped, surviving errors (a restarting
Postgres is an outage to wait out, not a reason for the process to die).

A transient database error (app.db.errors.is_transient) is an outage: one line. Anything else is a
bug or data no check foresaw: logged with its traceback and counted in
scheduler_unexpected_errors_total{loop}, so it is seen rather than retried quietly forever."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Any

from app.db.errors import is_transient
from app.telemetry import metrics

log = logging.getLogger(__name__)


async def sleep_or_stop(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=seconds)


async def every(stop: asyncio.Event, interval: float, step: Callable[[], Awaitable[Any]], name: str) -> None:
    while not stop.is_set():
        try:
            await step()
        except Exception as exc:
            if is_transient(exc):
                log.warning("%s: %s: %s; retrying", name, type(exc).__name__, exc)
            else:
                log.exception("%s: unexpected error; retrying", name)
                metrics.unexpected_errors_total.labels(name).inc()
        # Jitter keeps replicas from running their side-tasks in lockstep.
        await sleep_or_stop(stop, interval * random.uniform(0.8, 1.2))
