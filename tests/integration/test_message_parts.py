"""A message of several runs on a real JetStream (app/worker/delivery.py): each run is a delivery of
its own, and the message is answered once all of them are — acked when every run is done with,
redelivered (whole) when any was handed back, and a malformed message is terminated."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import nats
import pytest
from nats.aio.client import Client as NATS

from app.bus.jetstream import ensure_consumer, lanes
from app.bus.message import RunMessage, message_of
from app.bus.pull import PullConsumer
from app.config import Settings
from app.domain import DEFAULT_PRIORITY
from app.worker.delivery import Delivery, received


@pytest.fixture
async def nc(settings: Settings) -> AsyncIterator[NATS]:
    nc = await nats.connect(settings.nats_url)
    await ensure_consumer(nc.jetstream(), settings)
    yield nc
    await nc.close()


async def publish(nc: NATS, settings: Settings, runs: int) -> list[RunMessage]:
    now = datetime.now(UTC)
    carried = [
        RunMessage(uuid.uuid4(), now, "acme", "j", 1, 1, {}, {"type": "noop"}, 30.0) for _ in range(runs)
    ]
    body = message_of([r.entry() for r in carried])
    await nc.jetstream().publish(settings.subject_for("acme", DEFAULT_PRIORITY), body)
    return carried


async def fetch(nc: NATS, settings: Settings) -> list[Delivery]:
    sub = PullConsumer(nc, lanes(settings)[0])
    await sub.start()
    try:
        [msg] = await sub.fetch(1, timeout=5)
        return await received(msg)
    finally:
        await sub.stop()


async def consumer_state(nc: NATS, settings: Settings) -> tuple[int, int]:
    """(delivered, not acked; stored)"""
    await nc.flush()
    js = nc.jetstream()
    info = await js.consumer_info(settings.stream, settings.consumer)
    return info.num_ack_pending, (await js.stream_info(settings.stream)).state.messages


async def drained(nc: NATS, settings: Settings) -> tuple[int, int]:
    """The consumer's state once nothing is pending, or as it stands after 5 s. An ack is a publish
    the server applies on its own time, and the consumer's count of pending acks can trail the
    stream's removal of the message it acked (seen: (1, 0) read right after the last ack)."""
    state = await consumer_state(nc, settings)
    for _ in range(50):
        if state == (0, 0):
            break
        await asyncio.sleep(0.1)
        state = await consumer_state(nc, settings)
    return state


async def test_the_message_is_acked_once_every_run_of_it_is(nc: NATS, settings: Settings) -> None:
    carried = await publish(nc, settings, 3)
    deliveries = await fetch(nc, settings)
    assert [d.run for d in deliveries] == carried
    await deliveries[0].msg.ack()
    await deliveries[2].msg.term()  # a run left to the reaper is done with, as far as the message goes
    await deliveries[0].msg.ack()  # a part answers once: this second ack does not count
    assert await consumer_state(nc, settings) == (1, 1)
    await deliveries[1].msg.ack()
    assert await drained(nc, settings) == (0, 0)


async def test_a_run_handed_back_brings_the_whole_message_back(nc: NATS, settings: Settings) -> None:
    carried = await publish(nc, settings, 3)
    first = await fetch(nc, settings)
    await first[0].msg.ack()
    await first[1].msg.nak()
    assert await consumer_state(nc, settings) == (1, 1)  # one run still out: nothing answered yet
    await first[2].msg.ack()
    again = await fetch(nc, settings)  # redelivered at once (no delay asked), every run in it
    assert [d.run for d in again] == carried
    for d in again:
        await d.msg.ack()
    assert await drained(nc, settings) == (0, 0)


async def test_a_malformed_message_is_terminated(nc: NATS, settings: Settings) -> None:
    await nc.jetstream().publish(settings.subject_for("acme", DEFAULT_PRIORITY), b'{"v": 2, "runs": [{}]}')
    assert await fetch(nc, settings) == []
    assert await drained(nc, settings) == (0, 0)
