"""How many messages a worker asks for (app/worker/intake.py): enough for its free slots at the
size of its lane's largest message lately, and never more than it can take were every one full."""

from __future__ import annotations

import itertools

import pytest

from app.config import Settings
from app.worker.fairness import TenantSlots
from app.worker.intake import Intake
from tests.unit.test_held_runs import messages_of


def intake(**overrides: object) -> Intake:
    settings = Settings(**overrides)  # type: ignore[arg-type]
    slots = TenantSlots(settings.worker_concurrency, settings.worker_tenant_share)
    return Intake(settings, None, slots, None, None)  # type: ignore[arg-type]


def test_small_messages_are_asked_for_in_the_number_that_fills_the_free_slots() -> None:
    # 50 tenants in a claim of 500 make messages of ten runs: asked for as if each carried
    # MESSAGE_RUNS (25), a fetch brought 100 runs for 256 free.
    worker = intake(worker_concurrency=512, worker_fetch_batch=256, message_runs=25)
    assert worker._messages_for(512, carried=10) == 25  # 250 runs
    assert worker._messages_for(512, carried=25) == 10  # full messages: 250
    assert worker._messages_for(40, carried=10) == 4
    assert worker._messages_for(5, carried=10) == 1  # at least one


def test_a_fetch_never_asks_for_more_than_it_could_hold_were_every_message_full() -> None:
    worker = intake(worker_concurrency=512, worker_fetch_batch=256, message_runs=25)
    # Messages of one run lately; the next may carry 25 each. 20 messages of 25 fill 300 free slots
    # and the 200 runs' room to hold; 21 would send some back to the stream.
    for d in messages_of("a", 56):
        worker.held.add(d)
    assert worker._messages_for(300, carried=1) == 20


@pytest.mark.parametrize("message_runs", [1, 10, 25])
def test_what_a_fetch_brings_fits_the_slots_and_the_room_to_hold(message_runs: int) -> None:
    worker = intake(worker_concurrency=512, worker_fetch_batch=256, message_runs=message_runs)
    for held in (0, 100, 256, 300):
        worker.held.clear()
        for d in messages_of("a", held):
            worker.held.add(d)
        room = max(0, 256 - held)
        for free, carried in itertools.product(range(1, 600, 7), sorted({1, 3, 10, message_runs})):
            asked = worker._messages_for(free, carried)
            assert asked >= 1
            assert asked == 1 or asked * message_runs <= free + room, (held, free, carried)
            # No more than the free slots take (a fetch batch at most) when the messages are as large
            # as lately, unless at least one: runs fetched beyond them are held, a write of their own.
            assert asked == 1 or asked * carried <= min(free, 256)
