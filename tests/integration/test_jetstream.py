"""The JetStream plumbing against a real server. The engine's pipelined publisher: what it reports
acked is exactly what the stream stored, a refusal or a missing stream is False, an ack later than
the wait is ignored. The worker's pull consumer: a request that ends mid-fetch is renewed at once.
The workers' consumer: an existing one takes a new ack_wait."""

from __future__ import annotations

import asyncio
import time

import nats

from app.bus.jetstream import ensure_consumer, ensure_stream, lanes
from app.bus.publisher import Outgoing, Publisher
from app.bus.pull import PullConsumer
from app.config import Settings
from app.domain import DEFAULT_PRIORITY


def batch(settings: Settings, n: int, prefix: str = "m") -> list[Outgoing]:
    return [
        Outgoing(
            settings.subject_for(f"t{i % 3}", DEFAULT_PRIORITY),
            b'{"i": %d}' % i,
            {"Nats-Msg-Id": f"{prefix}{i}"},
        )
        for i in range(n)
    ]


async def test_acks_match_what_the_stream_stored(settings: Settings) -> None:
    nc = await nats.connect(settings.nats_url)
    js = nc.jetstream()
    await ensure_stream(js, settings)
    publisher = Publisher(nc)
    try:
        first = await publisher.send(batch(settings, 300, "a"))
        second = await publisher.send(batch(settings, 200, "b"))  # two batches in flight at once
        assert await publisher.acked(first, 5.0) == [True] * 300
        assert await publisher.acked(second, 5.0) == [True] * 200
        assert (await js.stream_info(settings.stream)).state.messages == 500
        # The same Nats-Msg-Id again is a duplicate: stored once, and acked (it is in the stream).
        assert await publisher.publish(batch(settings, 10, "a"), 5.0) == [True] * 10
        assert (await js.stream_info(settings.stream)).state.messages == 500
        assert await publisher.publish([], 5.0) == []
    finally:
        await publisher.stop()
        await nc.close()


async def test_refusals_and_missing_stream_are_not_acked(settings: Settings) -> None:
    nc = await nats.connect(settings.nats_url)
    js = nc.jetstream()
    await ensure_stream(js, settings)
    publisher = Publisher(nc)
    try:
        no_stream = Outgoing(f"{settings.subject_prefix}-nowhere.x", b"{}", {"Nats-Msg-Id": "n1"})
        # JetStream answers an error for a message that expects another stream than the one it hits.
        refused = Outgoing(
            settings.subject_for("t0", DEFAULT_PRIORITY),
            b"{}",
            {"Nats-Msg-Id": "r1", "Nats-Expected-Stream": "OTHER"},
        )
        good = batch(settings, 1, "g")[0]
        assert await publisher.publish([no_stream, refused, good], 5.0) == [False, False, True]
        assert (await js.stream_info(settings.stream)).state.messages == 1
    finally:
        await publisher.stop()
        await nc.close()


async def test_an_ack_after_the_wait_is_ignored(settings: Settings) -> None:
    nc = await nats.connect(settings.nats_url)
    js = nc.jetstream()
    await ensure_stream(js, settings)
    publisher = Publisher(nc)
    try:
        sent = await publisher.send(batch(settings, 50))
        # Nothing has been read off the socket yet, so no ack can have arrived: the wait times out.
        assert await publisher.acked(sent, 0.0) == [False] * 50
        await nc.flush()
        await asyncio.sleep(0.2)  # the reply subscription's callbacks run in a task of their own
        assert sent.ok == [False] * 50  # late acks found nobody waiting
        assert not publisher._waiting
    finally:
        await publisher.stop()
        await nc.close()


async def test_a_pull_request_that_expires_mid_fetch_is_renewed_at_once(settings: Settings) -> None:
    nc = await nats.connect(settings.nats_url)
    js = nc.jetstream()
    await ensure_consumer(js, settings)
    consumer = PullConsumer(nc, lanes(settings)[0])
    await consumer.start()
    try:
        # The first fetch's request (expires after 1 s) is answered at once, so it stays open...
        await js.publish(settings.subject_for("t0", DEFAULT_PRIORITY), b"1")
        assert len(await consumer.fetch(10, timeout=1.0)) == 1
        # ...and expires while the next fetch waits; a message published after that must still
        # arrive long before this fetch's own 4 s timeout.
        started = time.monotonic()
        second = asyncio.create_task(consumer.fetch(10, timeout=4.0))
        await asyncio.sleep(1.5)
        await js.publish(settings.subject_for("t0", DEFAULT_PRIORITY), b"2")
        msgs = await second
        assert [m.data for m in msgs] == [b"2"]
        assert time.monotonic() - started < 2.5
        for m in msgs:
            await m.ack()
    finally:
        await consumer.stop()
        await nc.close()


async def test_ensure_consumer_updates_the_ack_wait_of_an_existing_consumer(settings: Settings) -> None:
    """A consumer left by a release with another ACK_WAIT_SECONDS takes the new one when a worker
    starts: its messages would otherwise keep waiting the old ack_wait after their worker died."""
    nc = await nats.connect(settings.nats_url)
    js = nc.jetstream()
    try:
        await ensure_consumer(js, settings.model_copy(update={"ack_wait_seconds": 30.0}))
        for lane in lanes(settings):
            assert (await js.consumer_info(lane.stream, lane.consumer)).config.ack_wait == 30.0
        await ensure_consumer(js, settings)
        for lane in lanes(settings):
            info = await js.consumer_info(lane.stream, lane.consumer)
            assert info.config.ack_wait == settings.ack_wait_seconds == 5.0
    finally:
        await nc.close()
