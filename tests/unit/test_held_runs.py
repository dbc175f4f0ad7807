"""Runs a worker holds back (app/worker/held.py): per tenant, urgent-lane runs start first."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from app.bus.message import RunMessage
from app.worker.delivery import Delivery, Part
from app.worker.held import HeldRuns


def held(tenant: str, *, urgent: bool = False) -> Delivery:
    """A run of a message of its own (no message is acked here)."""
    return messages_of(tenant, 1, urgent=urgent)[0]


def messages_of(tenant: str, runs: int, *, urgent: bool = False) -> list[Delivery]:
    """The deliveries of one message carrying `runs` runs of the tenant."""
    return [
        Delivery(
            part,
            RunMessage(uuid.uuid4(), datetime.now(UTC), tenant, "j", 1, 1, {}, {"type": "python"}, 30),
            urgent=urgent,
        )
        for part in Part.split(None, runs)  # type: ignore[arg-type]
    ]


def test_a_tenants_urgent_run_starts_before_its_older_runs() -> None:
    runs = HeldRuns()
    older = [held("a") for _ in range(3)]
    for d in older:
        runs.add(d)
    urgent = held("a", urgent=True)
    runs.add(urgent)
    assert [runs.next_to_start("a") for _ in range(4)] == [urgent, *older]
    assert len(runs) == 0 and runs.waiting() == {}


def test_handing_back_takes_the_heaviest_tenants_newest_message_and_its_urgent_runs_last() -> None:
    runs = HeldRuns()
    urgent = held("a", urgent=True)
    normal = [held("a"), held("a")]
    b = held("b")
    for d in [urgent, *normal, b]:
        runs.add(d)
    load = {"a": 0, "b": 5}  # b runs more on this worker: it is the heaviest with 6
    assert runs.newest_message_of_heaviest(load.__getitem__) == [b]
    assert runs.newest_message_of_heaviest(load.__getitem__) == [normal[1]]
    assert runs.newest_message_of_heaviest(load.__getitem__) == [normal[0]]
    assert runs.newest_message_of_heaviest(load.__getitem__) == [urgent]
    assert len(runs) == 0 and runs.newest_message_of_heaviest(load.__getitem__) == []


def test_a_message_goes_back_whole_or_not_at_all() -> None:
    """Runs of one message go back together, and a message with a run started or done stays: its
    redelivery would bring that run back too (as a stale duplicate)."""
    runs = HeldRuns()
    whole = messages_of("a", 3)
    started = messages_of("a", 3)[1:]  # its first run left the held runs (started)
    older = messages_of("b", 2)
    for d in [*older, *started, *whole]:
        runs.add(d)
    load = {"a": 0, "b": 0}
    assert runs.newest_message_of_heaviest(load.__getitem__) == whole  # a: the heaviest, 5 held
    assert runs.newest_message_of_heaviest(load.__getitem__) == older  # a's other is not whole
    assert runs.newest_message_of_heaviest(load.__getitem__) == []
    assert list(runs) == started


def test_a_removed_run_is_gone_from_its_lane() -> None:
    runs = HeldRuns()
    urgent, normal = held("a", urgent=True), held("a")
    runs.add(urgent)
    runs.add(normal)
    runs.remove(urgent)
    assert urgent not in runs and runs.get(urgent.run.run_id) is None
    assert runs.next_to_start("a") is normal
    assert runs.waiting() == {}
