"""ACK_WAIT_SECONDS is short, so a killed worker's messages reach another worker within seconds
(tests/e2e/test_killed_worker_messages.py). A live worker keeps what it holds all the same: its
in-progress acks restart every held, starting and executing message's ack timer, however long its
runs wait for a slot, at a pace set by ack_wait and not by the lease heartbeat. Real Postgres and
NATS."""

from __future__ import annotations

import asyncio

import asyncpg
import nats

from app.bus.jetstream import ensure_consumer, lanes
from app.config import Settings
from app.engine.dispatcher import Dispatcher
from app.worker.consumer import Worker
from stack.dispatch import dispatch_once
from stack.eventually import eventually
from tests import factories
from tests.integration.test_engine_faults import statuses

RUNS = 6
SLEEP = 3.0  # seconds each run takes: the last two wait held for two of them, three ack_waits


async def test_a_live_worker_holding_runs_past_several_ack_waits_gets_nothing_redelivered(
    settings: Settings, pool: asyncpg.Pool
) -> None:
    # Leases as deployed (the heartbeat every 10 s); ack_wait far shorter; a message a run.
    s = settings.model_copy(
        update={"worker_concurrency": 2, "worker_fetch_batch": 20, "ack_wait_seconds": 2.0, "message_runs": 1}
    )
    async with pool.acquire() as conn:
        await factories.runs(conn, RUNS, tenant_id="a", target={"type": "python", "handler": "echo"})
        await conn.execute("UPDATE job_runs SET payload = $1", {"sleep": SLEEP})
    nc = await nats.connect(s.nats_url)
    stop = asyncio.Event()
    js = nc.jetstream()
    lane = lanes(s)[0]
    await ensure_consumer(js, s)
    running = asyncio.create_task(Worker(s, pool, nc).run(stop))
    try:
        assert await dispatch_once(Dispatcher(s, pool, nc)) == RUNS
        await eventually(lambda: statuses(pool), until=lambda c: c == {"succeeded": RUNS}, timeout=30)
        await nc.flush()
        info = await js.consumer_info(lane.stream, lane.consumer)
    finally:
        stop.set()
        await asyncio.gather(running, return_exceptions=True)
        await nc.close()
    # Each message delivered once: none came back while its run waited for a slot or ran.
    assert info.delivered.consumer_seq == RUNS, info
    assert (info.num_ack_pending, info.num_redelivered) == (0, 0), info
    async with pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM job_runs WHERE attempt = 1 AND epoch = 1") == RUNS
