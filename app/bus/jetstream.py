"""JetStream: connect, provision the stream and the workers' consumer, publish pipelined."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

import nats
import orjson
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js import JetStreamContext
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    RetentionPolicy,
    StorageType,
    StreamConfig,
)
from nats.js.errors import BadRequestError, NotFoundError

from app.config import Settings

log = logging.getLogger(__name__)

DUPLICATE_WINDOW_SECONDS = 120.0


async def connect(url: str, name: str, *, retry_at_start: bool = True) -> NATS:
    """A connection that keeps reconnecting: a NATS restart stalls publishes, it does not end the process.

    `retry_at_start=False`: a server that cannot be reached at all raises after a second try instead
    of being retried forever inside this call, so the caller can report it and stop when asked
    (app.runtime); once connected, the connection is re-made forever all the same."""

    async def on_error(exc: Exception) -> None:
        log.warning("nats: %s", exc)

    nc = await nats.connect(
        url,
        name=name,
        # nats-py counts per server and gives up once a server failed more than this; -1 never does.
        max_reconnect_attempts=-1 if retry_at_start else 1,
        reconnect_time_wait=0.5,
        connect_timeout=5,
        error_cb=on_error,
    )
    nc.options["max_reconnect_attempts"] = -1  # read again at every reconnect
    return nc


async def close(nc: NATS) -> None:
    """Flush what is written (acks, naks), then close. Not drain(): a pull subscription's queue is
    never marked done, so drain() waits out its whole timeout."""
    try:
        await nc.flush(timeout=2)
    except Exception as exc:
        log.info("nats: final flush failed: %s", exc)
    await nc.close()


@dataclass(frozen=True, slots=True)
class Lane:
    """One stream of runs and the workers' durable consumer on it. Two lanes: urgent runs (priority
    <= URGENT_PRIORITY) and the rest. Engines claim into the urgent lane and workers fetch from it in
    loops of their own, so an urgent run waits only behind urgent work, not behind everything
    backpressure already let into the other stream."""

    name: str  # "urgent" | "normal"
    stream: str
    subject_prefix: str
    consumer: str

    @property
    def subjects(self) -> str:
        return f"{self.subject_prefix}.>"


def lanes(settings: Settings) -> list[Lane]:
    """The normal lane, then the urgent one unless URGENT_PRIORITY is -1."""
    normal = Lane("normal", settings.stream, settings.subject_prefix, settings.consumer)
    if settings.urgent_priority < 0:
        return [normal]
    return [normal, Lane("urgent", settings.urgent_stream, settings.urgent_subject_prefix, settings.consumer)]


def stream_config(lane: Lane) -> StreamConfig:
    return StreamConfig(
        name=lane.stream,
        subjects=[lane.subjects],
        # Work-queue retention: a message is gone once a worker acks it; Postgres keeps the history.
        retention=RetentionPolicy.WORK_QUEUE,
        storage=StorageType.FILE,
        duplicate_window=DUPLICATE_WINDOW_SECONDS,
    )


def consumer_config(lane: Lane, settings: Settings) -> ConsumerConfig:
    return ConsumerConfig(
        durable_name=lane.consumer,
        ack_policy=AckPolicy.EXPLICIT,
        deliver_policy=DeliverPolicy.ALL,
        ack_wait=settings.ack_wait_seconds,
        # Redelivery is never given up on: the database's epoch fence drops what is stale. A worker
        # that holds a tenant back over its share naks with a delay, and every nak counts as a
        # delivery: a limit here would drop a patient tenant's runs (app/worker/consumer.py).
        max_deliver=-1,
        max_ack_pending=max(20_000, settings.worker_concurrency * 4),
        filter_subject=lane.subjects,
    )


async def ensure_stream(js: JetStreamContext, settings: Settings) -> None:
    """Create every lane's stream, or bring an existing one to this configuration. Safe to race."""
    for lane in lanes(settings):
        config = stream_config(lane)
        try:
            await js.add_stream(config)
        except BadRequestError:
            await js.update_stream(config)


async def delete_streams(js: JetStreamContext, settings: Settings) -> None:
    """Every lane's stream, where it exists (tests and benches clean up with it)."""
    for lane in lanes(settings):
        with contextlib.suppress(NotFoundError):
            await js.delete_stream(lane.stream)


async def ensure_consumer(js: JetStreamContext, settings: Settings) -> None:
    await ensure_stream(js, settings)
    for lane in lanes(settings):
        await js.add_consumer(lane.stream, consumer_config(lane, settings))


@dataclass(frozen=True, slots=True)
class Outgoing:
    subject: str
    payload: bytes
    headers: dict[str, str]


class Sent:
    """One batch handed to a Publisher: which of its messages JetStream has acked so far."""

    __slots__ = ("_answered", "_left", "ok", "tokens")

    def __init__(self, n: int):
        self.ok = [False] * n
        self.tokens: list[str] = []
        self._left = n
        self._answered = asyncio.Event()
        if n == 0:
            self._answered.set()

    def answer(self, index: int, ok: bool) -> None:
        self.ok[index] = ok
        self._left -= 1
        if self._left == 0:
            self._answered.set()

    async def answered(self, timeout: float) -> None:
        """Until every message is answered, or `timeout`."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._answered.wait(), timeout)


class Publisher:
    """Pipelined JetStream publishing: each message goes out on the core connection with a reply
    subject of its own under one wildcard inbox, and one subscription collects every PubAck.

    This is what nats-py's publish_async does, without its per-message NUID token, semaphore wait,
    future and done-callback: side by side on this machine it published 1.5-2.3x the messages per
    second (see docs/bench.md), and the engine's loop spent a third of its time there."""

    def __init__(self, nc: NATS):
        self.nc = nc
        self._inbox = ""
        self._next_token = 0
        self._waiting: dict[str, tuple[Sent, int]] = {}
        self._sub: Subscription | None = None

    async def start(self) -> None:
        """Subscribe to the PubAck inbox; nats-py re-subscribes it after a reconnect."""
        if self._sub is None:
            self._inbox = self.nc.new_inbox()
            self._sub = await self.nc.subscribe(f"{self._inbox}.*", cb=self._on_reply)

    async def stop(self) -> None:
        if self._sub is not None:
            with contextlib.suppress(Exception):  # a closed connection has nothing to unsubscribe
                await self._sub.unsubscribe()
            self._sub = None

    async def send(self, messages: Sequence[Outgoing]) -> Sent:
        """Hand every message to the connection without waiting for its PubAck. A message that
        cannot even be written (connection closed, reconnect buffer full) is answered False now."""
        await self.start()
        sent = Sent(len(messages))
        prefix = self._inbox + "."
        for index, m in enumerate(messages):
            token = str(self._next_token)
            self._next_token += 1
            # Registered first: a publish that flushes yields, and the PubAck may arrive meanwhile.
            self._waiting[token] = (sent, index)
            sent.tokens.append(token)
            try:
                await self.nc.publish(m.subject, m.payload, reply=prefix + token, headers=m.headers)
            except Exception as exc:
                del self._waiting[token]
                log.warning("publish failed: %s", exc)
                sent.answer(index, False)
        return sent

    async def acked(self, sent: Sent, timeout: float) -> list[bool]:
        """Wait up to `timeout` for the batch's PubAcks; True where JetStream acked. An ack that
        comes later is ignored, so its run is released, never taken as sent."""
        await sent.answered(timeout)
        for token in sent.tokens:
            self._waiting.pop(token, None)
        return list(sent.ok)

    async def publish(self, messages: Sequence[Outgoing], timeout: float) -> list[bool]:
        """Send a batch and wait for its PubAcks."""
        return await self.acked(await self.send(messages), timeout)

    async def _on_reply(self, msg: Msg) -> None:
        entry = self._waiting.pop(msg.subject[len(self._inbox) + 1 :], None)
        if entry is None:  # its batch stopped waiting for it
            return
        sent, index = entry
        # A status header is "503 no responders" (no stream on the subject); a body with "error" is
        # JetStream refusing the message. A duplicate (same Nats-Msg-Id) is stored once: an ack.
        ok = not (msg.headers and msg.headers.get("Status"))
        if ok:
            try:
                ok = "error" not in orjson.loads(msg.data)
            except orjson.JSONDecodeError:
                ok = False
        sent.answer(index, ok)


class PullConsumer:
    """Pulls from one lane's durable consumer with the plain pull protocol: a request for up to N
    messages (lingering until `expires`) answered to a private inbox whose callback queues them.
    A worker runs one per lane, each in its own fetch loop (app/worker/consumer.py).

    nats-py's PullSubscription.fetch waits for every single message with a fresh task, a uuid4 and
    asyncio.wait_for: 27% of the worker's CPU (measured with py-spy while draining 20k noop runs).
    Here one request is in flight at a time, so messages never wait locally for long (their ack_wait
    is already running) and the consumer's max_ack_pending still bounds what a worker holds. When a
    request ends (it expired, or the server refused it) a waiting fetch asks again at once: waiting
    out its own timeout instead left new messages without a request for up to a second (the
    `steady` bench's due lag to start, p95 0.93 s, found it)."""

    def __init__(self, nc: NATS, lane: Lane):
        self.nc = nc
        self.lane = lane
        self.subject = f"$JS.API.CONSUMER.MSG.NEXT.{lane.stream}.{lane.consumer}"
        self.inbox = nc.new_inbox()
        # Messages, and None where a request ended.
        self.queue: asyncio.Queue[Msg | None] = asyncio.Queue()
        self._outstanding = 0
        self._request_ends = 0.0
        self._sub: Subscription | None = None

    async def start(self) -> None:
        self._sub = await self.nc.subscribe(self.inbox, cb=self._on_message)

    async def stop(self) -> None:
        if self._sub is not None:
            await self._sub.unsubscribe()

    async def _on_message(self, msg: Msg) -> None:
        status = msg.headers.get("Status") if msg.headers else None
        if status is None:
            self._outstanding -= 1
            self.queue.put_nowait(msg)
        elif status != "100":  # 404 no messages, 408 request expired, 409 …: the request is over
            self._outstanding = 0
            self.queue.put_nowait(None)

    def drain_local(self) -> list[Msg]:
        """Messages received but not yet fetched (to nak at shutdown)."""
        return self._take(sys.maxsize)

    def _take(self, batch: int, into: list[Msg] | None = None) -> list[Msg]:
        msgs = [] if into is None else into
        while len(msgs) < batch and not self.queue.empty():
            msg = self.queue.get_nowait()
            if msg is not None:
                msgs.append(msg)
        return msgs

    async def fetch(self, batch: int, timeout: float) -> list[Msg]:
        """Up to `batch` messages; [] if none arrived within `timeout`."""
        deadline = time.monotonic() + timeout
        msgs = self._take(batch)
        while not msgs:
            now = time.monotonic()
            if now >= deadline:
                break
            if self._outstanding <= 0 or now >= self._request_ends:
                request = {"batch": batch, "expires": int(timeout * 1_000_000_000)}
                await self.nc.publish(self.subject, json.dumps(request).encode(), reply=self.inbox)
                self._outstanding = batch
                self._request_ends = now + timeout
            try:
                # Not past the request's own end: should its expiry not be answered (the 408), the
                # loop asks again instead of leaving the consumer without a request until `deadline`.
                first = await asyncio.wait_for(self.queue.get(), min(deadline, self._request_ends) - now)
            except TimeoutError:
                continue
            if first is not None:
                msgs.append(first)
            self._take(batch, msgs)
        return msgs
