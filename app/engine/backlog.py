"""What the workers' JetStream consumers hold, as the engine needs to know it.

Two decisions depend on it. Backpressure (the dispatcher): how many more messages may be claimed into
the stream — a count cap for the stream's memory, and a time bound: what waits undelivered must be
taken by the workers within `max_queue_seconds` at the rate they are measured to take messages.
Everything here counts messages, as JetStream does (a message carries up to MESSAGE_RUNS runs of one
tenant); only the autoscaler's gauge is turned into runs, at the runs a message of this engine
carried lately.
Rescue (the reaper): a dispatched run whose lease lapsed is put back to pending only once its
message can no longer be waiting in the stream, i.e. once it was claimed before the publish time of
the oldest message no worker has received yet. Both read the durable consumers every worker shares,
so any number of engines and workers see the same numbers.

Two lanes (app/bus/jetstream.py), each fetched by a loop of its own in every worker: the bounds apply
to the whole (what the workers have queued) and, separately, to the urgent lane alone (what an urgent
run waits behind). While the whole is full, the engine's urgent loop still claims as long as the
urgent lane has room.
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

from app.bus.jetstream import Lane, lanes
from app.config import Settings
from app.telemetry import metrics

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Backlog:
    waiting: int  # published, not yet delivered to any worker
    in_flight: int  # delivered, not yet acked: being started or executed (acked after the outcome)
    delivered: int  # deliveries so far (the consumer's sequence): a counter, for the delivery rate

    def __add__(self, other: Backlog) -> Backlog:
        return Backlog(
            self.waiting + other.waiting, self.in_flight + other.in_flight, self.delivered + other.delivered
        )


async def read_lane(js: JetStreamContext, lane: Lane) -> Backlog | None:
    """None when the lane's consumer does not exist yet (no worker ever started).

    What waits is read from the stream, not from the consumer's num_pending: the stream stores a
    message before it acks the publish, while the consumer counts it a moment later, and in that
    moment a check admitted one batch too many (issue 13: `150 < 100 + 50`). In a work-queue stream
    every stored message is unacked, so waiting = stored - delivered-unacked."""
    try:
        info, stream = await asyncio.gather(
            js.consumer_info(lane.stream, lane.consumer, timeout=1),
            js.stream_info(lane.stream),
        )
    except NotFoundError:
        return None
    waiting = max(int(info.num_pending), int(stream.state.messages) - int(info.num_ack_pending))
    return Backlog(waiting, int(info.num_ack_pending), int(info.delivered.consumer_seq))


async def read_backlog(js: JetStreamContext, settings: Settings) -> dict[str, Backlog]:
    """Each lane's backlog, by lane name; a lane without a consumer (no worker ever started) is left out."""
    all_lanes = lanes(settings)
    read = await asyncio.gather(*(read_lane(js, lane) for lane in all_lanes))
    return {lane.name: b for lane, b in zip(all_lanes, read, strict=True) if b is not None}


async def oldest_waiting_since(js: JetStreamContext, settings: Settings) -> datetime | None:
    """Publish time (NATS server clock) of the oldest message no worker has received yet, in any
    lane; None when none waits."""
    times = [t for t in await asyncio.gather(*(_oldest_waiting(js, lane) for lane in lanes(settings))) if t]
    return min(times, default=None)


async def _oldest_waiting(js: JetStreamContext, lane: Lane) -> datetime | None:
    """Messages are delivered in stream order, so the oldest waiting is the first one past the
    consumer's delivered sequence (or the stream's first, when no worker ever created the consumer)."""
    try:
        info = await js.consumer_info(lane.stream, lane.consumer, timeout=1)
        if info.num_pending == 0:
            return None
        after = int(info.delivered.stream_seq)
    except NotFoundError:
        after = 0
    try:
        msg = await js.get_msg(lane.stream, seq=after + 1, subject=lane.subjects, next=True)
    except NotFoundError:  # no stream, or nothing stored past that sequence
        return None
    return msg.time


def queue_room(backlog: Backlog, rate: float, settings: Settings, publishing: int) -> int:
    """Messages this engine may still add to the workers' queue. `publishing`: messages this engine
    sent whose PubAcks are not all in yet; the stream may not count them, and without them an
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
    """One engine's view of the workers' queue: whether to pause claiming, the urgent lane's room,
    and the gauges that tell the autoscalers which tier binds."""

    def __init__(self, nc: NATS, settings: Settings):
        # Its JetStream context is taken when the queue is read, not here: a dispatcher that only
        # claims (the hot-index tests, the bench) is built without a connection.
        self.nc = nc
        self.settings = settings
        self._queue_checked_at = 0.0
        # Messages this engine may still add before asking again: to the whole queue, to the urgent lane.
        self._room = 0
        self._urgent_room = 0
        # Messages sent whose PubAcks are not all in: the stream may not count them yet (all, urgent).
        self._publishing = 0
        self._urgent_publishing = 0
        self._sent = 0  # messages ever sent (all, urgent): what a read may not have seen
        self._urgent_sent = 0
        self._rate = DeliveryRate()
        self._paused = False
        self._runs_per_message = 1.0

    @property
    def urgent_room(self) -> int:
        """Urgent messages this engine may still add, as of the last read (`workers_behind` reads)."""
        return self._urgent_room

    def publishing(self, messages: int, urgent: int, runs: int | None = None) -> None:
        """A batch of `messages` (carrying `runs`) was claimed and sent, `urgent` of them in the
        urgent lane; its PubAcks are on their way."""
        self._room -= messages
        self._urgent_room -= urgent
        self._publishing += messages
        self._urgent_publishing += urgent
        self._sent += messages
        self._urgent_sent += urgent
        if messages and runs:
            self._runs_per_message = 0.8 * self._runs_per_message + 0.2 * runs / messages

    def settled(self, messages: int, urgent: int) -> None:
        self._publishing -= messages
        self._urgent_publishing -= urgent

    async def workers_behind(self) -> bool:
        """Backpressure: pause claiming while the workers' queue is full (see the module docstring for
        the bounds). Runs left pending stay in the fair per-tenant claim, keep their due lag visible in
        the database, and show as the *workers'* backlog: a paused engine exports
        `scheduler_dispatch_paused` 1, which tells the autoscalers that workers bind, not engines.
        The queue is read once a second, or at once when this engine used up the room it had; each
        read also renews the urgent lane's room (`urgent_room`)."""
        if self._room > 0 and time.monotonic() - self._queue_checked_at < 1.0:
            return False
        await self._read()
        return self._room <= 0

    async def _read(self) -> None:
        s = self.settings
        now = time.monotonic()
        self._queue_checked_at = now
        # Runs still publishing when the read begins. A batch whose PubAcks come in while the stream
        # is read may be missing from the read and from `_publishing` both (one batch too many was
        # admitted, issue 13's `150 < 100 + 50` again once a read took two lanes): it is counted as
        # still publishing, and so is a batch the urgent loop sends meanwhile.
        before = (self._publishing, self._sent, self._urgent_publishing, self._urgent_sent)
        try:
            by_lane = await read_backlog(self.nc.jetstream(), s)
        except Exception as exc:  # NATS away: publishes fail and release their runs anyway
            log.debug("backpressure: cannot read the workers' consumers: %s", exc)
            by_lane = {}
        if not by_lane:  # no consumer yet (no worker ever started), or NATS away: do not block on it
            self._room = s.max_queued_messages - self._publishing
            self._urgent_room = s.max_queued_messages - self._urgent_publishing
            self._paused = False
            metrics.dispatch_paused.set(0)
            return
        backlog = sum(by_lane.values(), Backlog(0, 0, 0))
        rate = self._rate.update(backlog.delivered, now)
        metrics.worker_backlog_messages.labels("waiting").set(backlog.waiting)
        metrics.worker_backlog_messages.labels("in_flight").set(backlog.in_flight)
        metrics.worker_backlog_runs.labels("waiting").set(round(backlog.waiting * self._runs_per_message))
        metrics.worker_backlog_runs.labels("in_flight").set(round(backlog.in_flight * self._runs_per_message))
        metrics.worker_delivery_rate.set(rate)
        publishing = before[0] + self._sent - before[1]
        urgent_publishing = before[2] + self._urgent_sent - before[3]
        self._room = queue_room(backlog, rate, s, publishing)
        urgent = by_lane.get("urgent")
        # The urgent lane drains at the whole rate (workers fetch from it in a loop of its own, and
        # it is small); without a consumer on it, as the whole without one, it does not block.
        if urgent is None:
            self._urgent_room = s.max_queued_messages - self._urgent_publishing
        else:
            self._urgent_room = queue_room(urgent, rate, s, urgent_publishing)
        paused = self._room <= 0
        if paused != self._paused:  # log the transitions, not every check
            log.info(
                "workers are %s (%d waiting, %d in flight, %.0f/s): %s claims%s",
                "behind" if paused else "catching up",
                backlog.waiting,
                backlog.in_flight,
                rate,
                "pausing" if paused else "resuming",
                " but urgent ones" if paused and self._urgent_room > 0 else "",
            )
        self._paused = paused
        metrics.dispatch_paused.set(int(paused))
