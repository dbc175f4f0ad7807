"""The domain event "runs became pending": published by every statement's caller that makes runs
pending (a submission, a retry, a resume, a cron occurrence, a grant of flow room, a rescue, a
release, a retried outcome), after its commit, with the rows (id, due_at).

Nothing in the scheduler needs it: Postgres is the truth and the claim finds pending runs by itself.
Its one subscriber is the Redis hot index (app/bus/hot_index.py, SCHEDULER_HOT_INDEX=redis, off by
default), which a process's runtime subscribes when it is on (app/runtime.py). With no subscriber,
publishing costs a look at an empty list."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

Subscriber = Callable[[Sequence[Any]], Awaitable[None]]
_subscribers: list[Subscriber] = []


def subscribe(subscriber: Subscriber) -> Callable[[], None]:
    """Calls `subscriber` with every batch of runs that became pending in this process, until the
    returned function is called. A subscriber never raises (a hint lost costs only a scan)."""
    _subscribers.append(subscriber)
    return lambda: _subscribers.remove(subscriber)


async def runs_pending(runs: Iterable[Any]) -> None:
    if not _subscribers:
        return
    rows = list(runs)
    if rows:
        for subscriber in list(_subscribers):
            await subscriber(rows)
