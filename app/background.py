"""Background services: the one shape of the work a process does beside answering requests (River's
maintenance services, Oban's plugins). The engine and the worker are each a list of them.

- A **Service** has a `name` and `run(stop)`: it works until `stop` is set, then settles what it
  has in flight (a batch acked or released, an outcome recorded, a run handed back) and returns.
- A **Periodic** service is one `step()` every `interval` seconds, jittered by ±`jitter` so that
  replicas do not step in lockstep. Its `wake` event, when it has one, cuts the wait short; a step
  that returns `Wait(seconds)` sets the next wait itself (`AGAIN`: none, more is due).
- A **Led** service is a periodic one that a single process at a time runs: its step takes a
  session advisory lock (`leader`, a key of app.db.locks) and does its work (`lead(conn)`) on that
  connection; a process that does not get the lock skips the step.
- **One error policy** (`survived`): a transient database error (app.db.errors.is_transient) is an
  outage to wait out: one warning line. Anything else is a bug or data no check foresaw: logged with
  its traceback and counted in scheduler_unexpected_errors_total{service}. Either way the loop goes
  on: one failed step never ends a process.
- **One stop model** (`run_services`): every service runs as a task named after it until `stop` is
  set or one of them ends on its own, which is a part that died (a process missing a part must not
  go on half-alive). Then the services are stopped stage by stage, each stage once the one before
  has returned, none of them cancelled; what ended the part that died is raised last.

A new periodic service is a class with a name, an interval and a step, added to its process's list
(app/engine/engine.py, app/worker/consumer.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import asyncpg

from app.aio import first_of, supervise
from app.db import locks
from app.db.errors import is_transient
from app.telemetry import metrics

log = logging.getLogger(__name__)
T = TypeVar("T")


class Service(Protocol):
    name: str

    async def run(self, stop: asyncio.Event) -> None: ...


@dataclass(frozen=True)
class Wait:
    """What a step may return to set the wait before the next one (instead of the interval)."""

    seconds: float


AGAIN = Wait(0.0)  # more is due: the next step at once


def survived(service: str, exc: BaseException) -> None:
    """The error policy: a transient database error is a warning, anything else an error with its
    traceback, counted."""
    if is_transient(exc):
        log.warning("%s: %s: %s; retrying", service, type(exc).__name__, exc)
    else:
        log.error("%s: unexpected error; going on", service, exc_info=exc)
        metrics.unexpected_errors_total.labels(service).inc()


async def sleep_or_stop(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=seconds)


class Periodic:
    """One `step()` every `interval` seconds until stopped; the step in flight finishes first."""

    name: str
    interval: float
    jitter = 0.2  # each wait is the interval times a uniform draw in [1 - jitter, 1 + jitter]
    wake: asyncio.Event | None = None  # set: the wait ends at once (cleared before each step)
    after_error: float | None = None  # the wait after a failed step; None: the interval

    async def step(self) -> object:
        raise NotImplementedError

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            if self.wake is not None:
                self.wake.clear()
            try:
                done = await self.step()
            except Exception as exc:
                survived(self.name, exc)
                done = None if self.after_error is None else Wait(self.after_error)
            if isinstance(done, Wait):
                if done.seconds <= 0:
                    continue
                seconds = done.seconds
            else:
                seconds = self.interval
            seconds *= random.uniform(1 - self.jitter, 1 + self.jitter)
            await first_of((stop,) if self.wake is None else (stop, self.wake), seconds)


class Led(Periodic, Generic[T]):
    """A periodic service one process at a time runs: `step()` is `lead(conn)` under the advisory
    lock `leader`, or None when another process holds it."""

    leader: int
    pool: asyncpg.Pool

    async def step(self) -> T | None:
        async with self.pool.acquire() as conn:
            if not await locks.try_advisory_lock(conn, self.leader):
                return None
            try:
                return await self.lead(conn)
            finally:
                await locks.advisory_unlock(conn, self.leader)

    async def lead(self, conn: asyncpg.Connection) -> T:
        raise NotImplementedError


async def run_services(what: str, stop: asyncio.Event, *stages: Sequence[Service]) -> None:
    """Runs every service of every stage until `stop` is set or one of them ends; then stops the
    stages in order (a stage is told to stop once the one before it has returned) and raises what
    ended a service that died, if one did."""
    halts = [asyncio.Event() for _ in stages]
    tasks: list[list[asyncio.Task[None]]] = [
        [asyncio.create_task(s.run(halt), name=s.name) for s in stage]
        for stage, halt in zip(stages, halts, strict=True)
    ]
    died = await supervise([t for stage in tasks for t in stage], stop, what)
    for halt, stage_tasks in zip(halts, tasks, strict=True):
        halt.set()
        results: list[Any] = await asyncio.gather(*stage_tasks, return_exceptions=True)
        for task, result in zip(stage_tasks, results, strict=True):
            if isinstance(result, BaseException) and died is None:
                log.error("%s: %s failed while stopping: %r", what, task.get_name(), result)
    if died is not None:
        raise died
