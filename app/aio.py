"""The event loop every scheduler process runs on: uvloop where it is installed (uvicorn[standard]
brings it on Linux and macOS), asyncio's own otherwise; the one way a process supervises its
background tasks (the engine's services, the worker's fetcher, completer and heartbeats); and the
deadline a worker holds each run's execution to."""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Callable, Collection, Coroutine
from types import TracebackType
from typing import Any, TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


# Young objects the collector lets accumulate before a collection (CPython's default: 700).
GC_YOUNG_THRESHOLD = 20_000


def tune_gc() -> None:
    """A process's hot path makes a claimed batch's worth of records, dicts and messages at a time,
    which kept CPython's young collection running every few hundred runs, each pass traversing the
    batch still alive; what the imports made lives as long as the process. So: what exists now is
    frozen out of every collection, and the young generation holds a few batches before it is
    collected (measured in docs/bench.md, verdict 37)."""
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])


def run(main: Callable[[], Coroutine[Any, Any, T]]) -> T:
    tune_gc()
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(main())


async def supervise(
    tasks: Collection[asyncio.Task[Any]], stop: asyncio.Event, what: str
) -> BaseException | None:
    """Waits until `stop` is set or one of a process's named background tasks ends, whichever comes
    first (procrastinate's and River's shape: asyncio.wait(FIRST_COMPLETED)). A task that ends
    while not stopping is a part of the process that died: it is logged, and what it raised (a
    RuntimeError if it just returned) is returned for the caller to raise once it has stopped the
    rest: a process missing one of its parts must not go on half-alive."""
    stopper = asyncio.ensure_future(stop.wait())
    try:
        done, _ = await asyncio.wait({*tasks, stopper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopper.cancel()
    for task in done - {stopper}:
        if task.cancelled():
            error: BaseException | None = asyncio.CancelledError(
                f"{what} task {task.get_name()} was cancelled"
            )
        else:
            error = task.exception()
        if error is None and stop.is_set():
            continue  # it ended because it was told to
        if error is None:
            error = RuntimeError(f"{what} task {task.get_name()} ended")
        log.error("%s task %s died: %r; stopping the %s", what, task.get_name(), error, what)
        return error
    return None


async def first_of(
    events: Collection[asyncio.Event], timeout: float | None, tasks: Collection[asyncio.Future[Any]] = ()
) -> None:
    """Wait until any of the events is set or any of the tasks is done, or the timeout passes."""
    waiters = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait([*tasks, *waiters], timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waiters:
            w.cancel()


class Deadline:
    """`asyncio.timeout(seconds)` for a block of the current task, as a plain `with`: when the time
    is up the task is cancelled, and the block raises TimeoutError in place of that cancellation
    (any other cancellation, even at the same moment, goes through as it came). A worker enters one
    for every run it executes; asyncio.timeout's object, state machine and async enter and exit cost
    ~5 µs a run on uvloop, this timer and flag ~1 (docs/bench.md verdict 44)."""

    __slots__ = ("_cancelling", "_seconds", "_task", "_timer", "expired")

    def __init__(self, seconds: float):
        self._seconds = seconds
        self.expired = False

    def __enter__(self) -> Deadline:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("a Deadline must be entered inside a task")
        self._task = task
        self._cancelling = task.cancelling()
        self._timer = asyncio.get_running_loop().call_later(self._seconds, self._expire)
        return self

    def _expire(self) -> None:
        self.expired = True
        self._task.cancel()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._timer.cancel()
        # As asyncio.timeout decides: the cancellation is this deadline's only if no other was
        # requested beside it (uncancel() counts the requests still standing).
        if self.expired and kind is asyncio.CancelledError and self._task.uncancel() <= self._cancelling:
            raise TimeoutError from exc
