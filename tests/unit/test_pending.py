"""The domain event "runs became pending" (app/pending.py): every subscriber hears each batch, none
once unsubscribed, and publishing with no subscriber does nothing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app import pending


async def test_subscribers_hear_each_batch_until_they_unsubscribe() -> None:
    heard: list[list[Any]] = []

    async def hint(rows: Sequence[Any]) -> None:
        heard.append(list(rows))

    unsubscribe = pending.subscribe(hint)
    try:
        await pending.runs_pending(iter([{"id": 1}, {"id": 2}]))  # any iterable, read once
        await pending.runs_pending([])  # nothing became pending: nobody is called
    finally:
        unsubscribe()
    await pending.runs_pending([{"id": 3}])
    assert heard == [[{"id": 1}, {"id": 2}]]


async def test_with_no_subscriber_publishing_does_nothing() -> None:
    await pending.runs_pending([{"id": "x", "due_at": None}])  # no index to write to, no error
