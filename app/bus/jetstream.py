"""JetStream: connect, and provision the lanes (a stream and the workers' consumer each). Publishing
is app/bus/publisher.py, pulling app/bus/pull.py."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass

import nats
from nats.aio.client import Client as NATS
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

from app.config import Settings, nats_servers

log = logging.getLogger(__name__)

DUPLICATE_WINDOW_SECONDS = 120.0
CONSUMER_REPLICAS_EXCEED_STREAM = 10126  # JetStream's error code
SCALE_TIMEOUT_SECONDS = 60.0


async def connect(url: str, name: str, *, retry_at_start: bool = True) -> NATS:
    """A connection that keeps reconnecting: a NATS restart stalls publishes, it does not end the process.
    `url` is NATS_URL: one server or a cluster's, separated by commas; a lost server's connection
    moves to another (and to the servers the cluster announces).

    `retry_at_start=False`: a server that cannot be reached at all raises after a second try instead
    of being retried forever inside this call, so the caller can report it and stop when asked
    (app.runtime); once connected, the connection is re-made forever all the same."""

    async def on_error(exc: Exception) -> None:
        log.warning("nats: %s", exc)

    nc = await nats.connect(
        servers=nats_servers(url),
        name=name,
        # nats-py counts per server and gives up once a server failed more than this; -1 never does.
        max_reconnect_attempts=-1 if retry_at_start else 1,
        reconnect_time_wait=0.5,
        connect_timeout=5,
        # A server that froze or vanished without closing the connection (a stopped process, a dead
        # host) is noticed in 10-15 s: at the ping that finds two unanswered, not nats-py's default
        # four minutes. That is well inside an engine's 30 s of re-sending a batch
        # (PUBLISH_RETRY_SECONDS), so the engine moves to another server and its batch is acked
        # there instead of going back to pending; a server that still answers pings keeps its
        # clients.
        ping_interval=5,
        max_outstanding_pings=2,
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

    @property
    def urgent(self) -> bool:
        return self.name == "urgent"


def lanes(settings: Settings) -> list[Lane]:
    """The normal lane, then the urgent one unless URGENT_PRIORITY is -1."""
    normal = Lane("normal", settings.stream, settings.subject_prefix, settings.consumer)
    if settings.urgent_priority < 0:
        return [normal]
    return [normal, Lane("urgent", settings.urgent_stream, settings.urgent_subject_prefix, settings.consumer)]


def stream_config(lane: Lane, replicas: int = 1) -> StreamConfig:
    return StreamConfig(
        name=lane.stream,
        subjects=[lane.subjects],
        # Work-queue retention: a message is gone once a worker acks it; Postgres keeps the history.
        retention=RetentionPolicy.WORK_QUEUE,
        storage=StorageType.FILE,
        duplicate_window=DUPLICATE_WINDOW_SECONDS,
        num_replicas=replicas,
    )


def consumer_config(lane: Lane, settings: Settings) -> ConsumerConfig:
    return ConsumerConfig(
        durable_name=lane.consumer,
        ack_policy=AckPolicy.EXPLICIT,
        deliver_policy=DeliverPolicy.ALL,
        ack_wait=settings.ack_wait_seconds,
        # Redelivery is never given up on: the database's epoch fence drops what is stale. A worker
        # that holds a tenant back over its share naks with a delay, and every nak counts as a
        # delivery: a limit here would drop a patient tenant's runs (app/worker/intake.py).
        max_deliver=-1,
        max_ack_pending=max(20_000, settings.worker_concurrency * 4),
        filter_subject=lane.subjects,
        num_replicas=settings.stream_replicas,
    )


async def ensure_stream(js: JetStreamContext, settings: Settings) -> None:
    """Create every lane's stream, or bring an existing one to this configuration. Safe to race.

    Replicas are only ever raised (STREAM_REPLICAS): a process still configured for fewer, during a
    rolling change, leaves a stream as replicated as it found it."""
    for lane in lanes(settings):
        config = stream_config(lane, settings.stream_replicas)
        try:
            await js.add_stream(config)
        except BadRequestError:
            current = (await js.stream_info(lane.stream)).config.num_replicas or 1
            config.num_replicas = max(config.num_replicas or 1, current)
            await js.update_stream(config)


async def delete_streams(js: JetStreamContext, settings: Settings) -> None:
    """Every lane's stream, where it exists (tests and benches clean up with it)."""
    for lane in lanes(settings):
        with contextlib.suppress(NotFoundError):
            await js.delete_stream(lane.stream)


async def ensure_consumer(js: JetStreamContext, settings: Settings) -> None:
    """Every lane's stream, and the workers' consumer on it created or brought to this configuration
    (ACK_WAIT_SECONDS included, so a consumer an older release made is updated; its replicas, like the
    stream's, only ever raised)."""
    await ensure_stream(js, settings)
    for lane in lanes(settings):
        config = consumer_config(lane, settings)
        with contextlib.suppress(NotFoundError):
            current = (await js.consumer_info(lane.stream, lane.consumer)).config.num_replicas or 1
            config.num_replicas = max(config.num_replicas or 1, current)
        try:
            await js.add_consumer(lane.stream, config)
        except BadRequestError as exc:
            if exc.err_code != CONSUMER_REPLICAS_EXCEED_STREAM:
                raise
            # The stream was just raised and its new replicas are still catching up (about ten
            # seconds on loopback): a consumer may not have more replicas than its stream has yet.
            await _until_scaled(js, lane.stream)
            await js.add_consumer(lane.stream, config)


async def _until_scaled(js: JetStreamContext, stream: str) -> None:
    """Until the stream has every replica its configuration asks for, or SCALE_TIMEOUT_SECONDS."""
    deadline = time.monotonic() + SCALE_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        info = await js.stream_info(stream)
        have = 1 + len(info.cluster.replicas or []) if info.cluster is not None else 1
        if have >= (info.config.num_replicas or 1):
            return
        await asyncio.sleep(0.5)
