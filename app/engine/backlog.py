"""What the workers' JetStream consumer holds, as the engine needs to know it.

Two decisions depend on it. Backpressure (the dispatcher): how many more runs may be claimed into
the stream — a count cap for the stream's memory, and a time bound: what waits undelivered must be
taken by the workers within `max_queue_seconds` at the rate they are measured to take messages.
Rescue (the reaper): a dispatched run whose lease lapsed is put back to pending only once its
message can no longer be waiting in the stream, i.e. once it was claimed before the publish time of
the oldest message no worker has received yet. Both read the one durable consumer that every worker
shares, so any number of engines and workers see the same numbers.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime

from nats.js import JetStreamContext
from nats.js.errors import NotFoundError

from app.config import Settings


@dataclass(frozen=True, slots=True)
class Backlog:
    waiting: int  # published, not yet delivered to any worker
    in_flight: int  # delivered, not yet acked: being started or executed (acked after the outcome)
    delivered: int  # deliveries so far (the consumer's sequence): a counter, for the delivery rate


async def read_backlog(js: JetStreamContext, settings: Settings) -> Backlog | None:
    """None when the consumer does not exist yet (no worker ever started).

    What waits is read from the stream, not from the consumer's num_pending: the stream stores a
    message before it acks the publish, while the consumer counts it a moment later, and in that
    moment a check admitted one batch too many (issue 13: `150 < 100 + 50`). In a work-queue stream
    every stored message is unacked, so waiting = stored - delivered-unacked."""
    try:
        info, stream = await asyncio.gather(
            js.consumer_info(settings.stream, settings.consumer, timeout=1),
            js.stream_info(settings.stream),
        )
    except NotFoundError:
        return None
    waiting = max(int(info.num_pending), int(stream.state.messages) - int(info.num_ack_pending))
    return Backlog(waiting, int(info.num_ack_pending), int(info.delivered.consumer_seq))


async def oldest_waiting_since(js: JetStreamContext, settings: Settings) -> datetime | None:
    """Publish time (NATS server clock) of the oldest message no worker has received yet; None when
    none waits. Messages are delivered in stream order, so that is the first one past the consumer's
    delivered sequence (or the stream's first, when no worker ever created the consumer)."""
    try:
        info = await js.consumer_info(settings.stream, settings.consumer, timeout=1)
        if info.num_pending == 0:
            return None
        after = int(info.delivered.stream_seq)
    except NotFoundError:
        after = 0
    try:
        msg = await js.get_msg(
            settings.stream, seq=after + 1, subject=f"{settings.subject_prefix}.>", next=True
        )
    except NotFoundError:  # no stream, or nothing stored past that sequence
        return None
    return msg.time


def queue_room(backlog: Backlog, rate: float, settings: Settings, publishing: int) -> int:
    """Messages this engine may still add to the workers' queue. `publishing`: runs this engine
    claimed whose PubAcks are not all in yet; the stream may not count them, and without them an
    engine admitted one more batch per batch in flight (the PubAcks of the last being on their way).
    The time bound is at least one round of claim batches, so a cold start (no rate measured yet)
    and idle workers get work at once, and at most half the dispatch lease, so that a lapsed lease
    keeps meaning a lost message rather than a slow queue."""
    by_count = settings.max_queued_messages - backlog.waiting - backlog.in_flight
    floor = settings.batch_size * settings.dispatch_batches_in_flight
    horizon = min(settings.max_queue_seconds, settings.dispatch_lease_seconds / 2)
    by_time = max(floor, int(rate * horizon)) - backlog.waiting
    return min(by_count, by_time) - publishing


class DeliveryRate:
    """Messages handed to workers per second, from the consumer's delivered counter, measured over
    windows of at least a second and smoothed (workers fetch in bursts of up to their concurrency)."""

    WINDOW_SECONDS = 1.0

    def __init__(self) -> None:
        self.per_second = 0.0
        self._mark: tuple[float, int] | None = None

    def update(self, delivered: int, now: float) -> float:
        if self._mark is None or delivered < self._mark[1]:  # first reading, or the consumer was recreated
            self._mark = (now, delivered)
            return self.per_second
        since, before = self._mark
        if now - since >= self.WINDOW_SECONDS:
            measured = (delivered - before) / (now - since)
            self.per_second = measured if self.per_second == 0 else 0.5 * self.per_second + 0.5 * measured
            self._mark = (now, delivered)
        return self.per_second
