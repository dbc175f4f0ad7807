"""The event loop every scheduler process runs on: uvloop where it is installed (uvicorn[standard]
brings it on Linux and macOS), asyncio's own otherwise; and the one way a process supervises its
background tasks (the engine's services, the worker's fetcher, completer and heartbeats)."""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Callable, Collection, Coroutine
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
