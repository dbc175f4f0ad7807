"""A group commit of outcomes with rows Postgres refuses: those rows are isolated, the others commit
(issue 12, item 2). The errors here skip the sanitiser on purpose, as one that escaped it would."""

from __future__ import annotations

import asyncio

import asyncpg
import nats

from app.bus.jetstream import ensure_consumer, lanes
from app.bus.message import RunMessage
from app.bus.pull import PullConsumer
from app.config import Settings
from app.domain import DEFAULT_PRIORITY
from app.worker.completer import Completer
from app.worker.delivery import Delivery, Part
from stack.eventually import eventually
from tests import factories


async def test_a_refused_outcome_is_isolated_and_the_rest_commit(
    settings: Settings, pool: asyncpg.Pool
) -> None:
    async with pool.acquire() as conn:
        good = await factories.runs(conn, 6, tenant_id="good", max_attempts=1)
        evil = await factories.runs(conn, 2, tenant_id="evil", max_attempts=1)
        await conn.execute(
            "UPDATE job_runs SET status = 'running', epoch = 1, attempt = 1,"
            " lease_expires_at = now() + interval '1 minute'"
        )
    rows = [*good[:3], *evil, *good[3:]]  # the refused rows in the middle of the batch
    nc = await nats.connect(settings.nats_url)
    try:
        js = nc.jetstream()
        await ensure_consumer(js, settings)
        for row in rows:
            await js.publish(settings.subject_for(row["tenant_id"], DEFAULT_PRIORITY), b"{}")
        sub = PullConsumer(nc, lanes(settings)[0])
        await sub.start()
        msgs: list = []
        while len(msgs) < len(rows):
            msgs += await sub.fetch(len(rows) - len(msgs), timeout=2)
        completer = Completer(settings, pool)
        for msg, row in zip(msgs, rows, strict=True):
            run = RunMessage(row["id"], row["scheduled_at"], row["tenant_id"], "j", 1, 1, {}, {}, 30)
            d = Delivery(Part.alone(msg), run, attempt=1)
            if row["tenant_id"] == "evil":  # a NUL Postgres refuses; a lone surrogate asyncpg cannot encode
                d.error = "bad\x00body" if row is evil[0] else "bad\ud800body"
            else:
                d.ok = True
            completer.add(d)
        async with asyncio.timeout(15):
            assert await completer.flush()
        await nc.flush()

        async def ack_pending() -> int:
            return (await js.consumer_info(settings.stream, settings.consumer)).num_ack_pending

        # Every message acked, the refused ones too. The server takes an ack off the consumer
        # asynchronously after it arrives, so the count may trail the flush for a moment.
        await eventually(ack_pending, until=lambda n: n == 0, timeout=5, what="no ack pending")
    finally:
        await nc.close()
    async with pool.acquire() as conn:
        got = {r["id"]: r for r in await conn.fetch("SELECT id, status, last_error FROM job_runs")}
    assert all(got[r["id"]]["status"] == "succeeded" for r in good)
    for row in evil:
        assert got[row["id"]]["status"] == "failed"
        assert got[row["id"]]["last_error"].startswith("the outcome could not be recorded:")
