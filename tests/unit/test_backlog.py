"""Backpressure's arithmetic (app/engine/backlog.py) and the reaper's watermark, without I/O."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from app.config import Settings
from app.engine.backlog import Backlog, DeliveryRate, queue_room
from app.engine.reaper import NOTHING, _earliest

S = Settings(batch_size=50, dispatch_batches_in_flight=2, max_queued_messages=10_000, max_queue_seconds=10)


def test_runs_whose_pubacks_are_out_count_against_the_room() -> None:
    """Issue 13: with 50 in the stream and 50 more published but not acked, a bound of 100 is full."""
    backlog = Backlog(waiting=50, in_flight=0, delivered=0)
    capped = S.model_copy(update={"max_queued_messages": 100})
    assert queue_room(backlog, 0.0, capped, publishing=50) == 0
    assert queue_room(backlog, 0.0, capped, publishing=0) == 50


def test_the_queue_is_sized_in_seconds_of_the_workers_rate() -> None:
    # 32 runs/s (one worker, 32 slots, a 1 s target): 10 s of queue is 320 messages.
    assert queue_room(Backlog(waiting=300, in_flight=32, delivered=0), 32.0, S, publishing=0) == 20
    assert queue_room(Backlog(waiting=320, in_flight=32, delivered=0), 32.0, S, publishing=0) == 0
    # No rate measured yet (cold start, idle workers): one round of claim batches may go at once.
    assert queue_room(Backlog(waiting=0, in_flight=0, delivered=0), 0.0, S, publishing=0) == 100
    # Fast workers: the count cap (the stream's memory) binds before the time bound.
    assert queue_room(Backlog(waiting=9_000, in_flight=500, delivered=0), 6_000.0, S, publishing=0) == 500


def test_the_time_bound_never_exceeds_half_the_lease() -> None:
    short_lease = S.model_copy(update={"dispatch_lease_seconds": 4.0})  # 10 s asked, 2 s applied
    assert queue_room(Backlog(waiting=0, in_flight=0, delivered=0), 100.0, short_lease, publishing=0) == 200


def test_delivery_rate_is_measured_over_windows_of_a_second() -> None:
    rate = DeliveryRate()
    assert rate.update(1000, now=10.0) == 0.0  # first reading: nothing to compare with
    assert rate.update(1016, now=10.5) == 0.0  # half a second: not yet a window
    assert rate.update(1032, now=11.0) == 32.0
    assert rate.update(1096, now=12.0) == (32.0 + 64.0) / 2  # smoothed
    assert rate.update(5, now=13.0) == 48.0  # the consumer was recreated: start over, keep the estimate


def test_the_stricter_watermark_wins() -> None:
    t = datetime(2026, 12, 1, tzinfo=UTC)
    assert _earliest(None, None) is None  # nothing waited then or now: any lapsed run may be rescued
    assert _earliest(None, t) == t
    assert _earliest(t, t + timedelta(seconds=5)) == t
    assert _earliest(NOTHING, None) == NOTHING  # JetStream could not be asked: rescue none
