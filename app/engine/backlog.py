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
import logging
import time
from dataclasses import dataclass
from datetime import datetime

from nats.aio.client import Client as NATS
from nats.js import JetStreamContext
from nats.js.errors import NotFoundError

from app.config import Settings
from app.telemetry import metrics

log = logging.getLogger(__name__)


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


class Backpressure:
    """One engine's view of the workers' queue: whether to pause claiming, and the gauges that tell
    the autoscalers which tier binds."""

    def __init__(self, nc: NATS, settings: Settings):
        # Its JetStream context is taken when the queue is read, not here: a dispatcher that only
        # claims (the hot-index tests, the bench) is built without a connection.
        self.nc = nc
        self.settings = settings
        self._queue_checked_at = 0.0
        self._room = 0  # messages this engine may still add to the workers' queue before asking again
        self._publishing = 0  # runs claimed whose PubAcks are not all in: the stream may not count them yet
        self._rate = DeliveryRate()
        self._paused = False

    def publishing(self, runs: int) -> None:
        """A batch was claimed and sent; its PubAcks are on their way."""
        self._room -= runs
        self._publishing += runs

    def settled(self, runs: int) -> None:
        self._publishing -= runs

    async def workers_behind(self) -> bool:
        """Backpressure: pause claiming while the workers' queue is full (see app/engine/backlog.py
        for the two bounds). Runs left pending stay in the fair per-tenant claim, keep their due lag
        visible in the database, and show as the *workers'* backlog: a paused engine exports
        `scheduler_dispatch_paused` 1, which tells the autoscalers that workers bind, not engines.
        The stream is asked once a second, or at once when this engine used up the room it had."""
        now = time.monotonic()
        if self._room > 0 and now - self._queue_checked_at < 1.0:
            return False
        self._queue_checked_at = now
        try:
            backlog = await read_backlog(self.nc.jetstream(), self.settings)
        except Exception as exc:  # NATS away: publishes fail and release their runs anyway
            log.debug("backpressure: cannot read the workers' consumer: %s", exc)
            backlog = None
        if backlog is None:  # no consumer yet (no worker ever started), or NATS away: do not block on it
            self._room = self.settings.max_queued_messages - self._publishing
            self._paused = False
            metrics.dispatch_paused.set(0)
            return False
        rate = self._rate.update(backlog.delivered, now)
        metrics.worker_backlog_messages.labels("waiting").set(backlog.waiting)
        metrics.worker_backlog_messages.labels("in_flight").set(backlog.in_flight)
        metrics.worker_delivery_rate.set(rate)
        self._room = queue_room(backlog, rate, self.settings, self._publishing)
        paused = self._room <= 0
        if paused != self._paused:  # log the transitions, not every check
            log.info(
                "workers are %s (%d waiting, %d in flight, %.0f/s): %s claims",
                "behind" if paused else "catching up",
                backlog.waiting,
                backlog.in_flight,
                rate,
                "pausing" if paused else "resuming",
            )
        self._paused = paused
        metrics.dispatch_paused.set(int(paused))
        return paused
