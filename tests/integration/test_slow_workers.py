"""Workers slower than the dispatch lease (issue 14): a run whose message waits in the stream is not
lost, so the reaper must not re-dispatch it; a run whose message never reached the stream (its engine
died between claim and publish) is still rescued, once nothing older waits."""

from __future__ import annotations

import asyncio

import asyncpg
import nats

from app.bus.jetstream import ensure_consumer
from app.bus.message import decode
from app.config import Settings
from app.db import transitions as dispatch
from app.engine.dispatcher import Dispatcher
from app.engine.reaper import Reaper
from stack.dispatch import dispatch_once
from tests import factories
from tests.integration.test_engine_faults import statuses


async def reap_twice(reaper: Reaper) -> int:
    """Two passes: a pass judges by the watermark the pass before it read."""
    rescued = await reaper.step()
    await asyncio.sleep(0.1)
    return rescued + await reaper.step()


async def take_and_ack_everything(nc: nats.NATS, s: Settings) -> int:
    """What workers that received the messages and then vanished leave behind: an empty stream.
    Returns the runs the messages carried."""
    sub = await nc.jetstream().pull_subscribe(f"{s.subject_prefix}.>", durable=s.consumer, stream=s.stream)
    taken = 0
    while True:
        try:
            msgs = await sub.fetch(100, timeout=1)
        except (nats.errors.TimeoutError, TimeoutError):
            return taken
        for m in msgs:
            await m.ack()
            taken += len(decode(m.data))


async def test_a_run_waiting_in_the_stream_is_not_re_dispatched(
    settings: Settings, pool: asyncpg.Pool
) -> None:
    s = settings.model_copy(update={"dispatch_lease_seconds": 1.0, "publish_timeout_seconds": 0.5})
    async with pool.acquire() as conn:
        await factories.runs(conn, 20, tenant_id="queued")
    nc = await nats.connect(s.nats_url)
    try:
        await ensure_consumer(nc.jetstream(), s)  # workers exist, but are busy: nothing is taken
        assert await dispatch_once(Dispatcher(s, pool, nc)) == 20
        async with pool.acquire() as conn:
            await factories.runs(conn, 1, tenant_id="doomed")
            floor, now = await dispatch.claim_floor(conn)
            # An engine that claims and dies before publishing: its run has no message anywhere.
            [doomed] = await dispatch.claim_due_runs(
                conn,
                floor=floor,
                ceiling=now,
                per_tenant_cap=10,
                batch_size=10,
                owner="dead",
                lease_seconds=1.0,
            )
        await asyncio.sleep(1.3)  # every lease has lapsed

        reaper = Reaper(s, pool, nc=nc)
        # The 20 wait behind slow workers: re-sending them would only double the work. The doomed run
        # was claimed after the oldest waiting message, so it could be waiting too: it waits its turn.
        assert await reap_twice(reaper) == 0
        assert await statuses(pool) == {"dispatched": 21}
        # Without JetStream to ask, the lease alone decides, as before: all of them would go back.

        assert await take_and_ack_everything(nc, s) == 20
        # Nothing waits any more: a dispatched run now has no message anywhere, and is rescued.
        assert await reap_twice(reaper) == 21
    finally:
        await nc.close()
    async with pool.acquire() as conn:
        row = await conn.fetchrow("SELECT status, attempt FROM job_runs WHERE id = $1", doomed["id"])
    assert (row["status"], row["attempt"]) == ("pending", 0)  # no attempt consumed


async def test_without_nats_no_dispatched_run_is_rescued(settings: Settings, pool: asyncpg.Pool) -> None:
    """A re-dispatched run could not be published either; running runs are still reaped."""
    s = settings.model_copy(update={"nats_url": "nats://127.0.0.1:1"})
    async with pool.acquire() as conn:
        await factories.runs(conn, 2, tenant_id="a")
        await conn.execute(
            "UPDATE job_runs SET status = 'dispatched', epoch = 1, dispatched_at = now() - interval '1 h', "
            "lease_expires_at = now() - interval '1 s'"
        )
    nc = await nats.connect(settings.nats_url)
    await nc.close()  # a client whose server is gone
    assert await reap_twice(Reaper(s, pool, nc=nc)) == 0
    assert await statuses(pool) == {"dispatched": 2}
